"""The README's pictures, taken from a real browser: the MLflow runs table of a small sweep and
the report's bar plot of that sweep.

    python scripts/screenshots.py [--out docs/img] [--browser chromium]

It runs a retrieval-only sweep (``-m rag_method=base,hybrid,reranker generator=none
dataset.limit=40``) in an empty temporary directory, starts ``mlflow server`` on a free loopback
port over that store, opens the experiment's runs table and the comparison page of the sweep's
cells in headless Chromium (Debian: ``apt-get install chromium``) and saves ``mlflow_runs.png`` and
``mlflow_compare.png``; the sweep's end has already made its report, whose ``table3_bars.png`` is
copied next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.monotonic() > end:
                raise SystemExit(f"{url} did not answer within {timeout:.0f}s") from None
        time.sleep(0.5)  # polling a server that is starting: nothing to wait on but the port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_PROGRESS": "0"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    with tempfile.TemporaryDirectory(prefix="t2exp-shots-") as tmp:
        work = Path(tmp)
        sweep = ["-m", "rag_method=base,hybrid,reranker", "generator=none", "dataset.limit=40",
                 f"paths.models={ROOT / '.t2exp_cache' / 'models'}"]
        subprocess.run([sys.executable, "-m", "t2exp", *sweep], cwd=work, env=env, check=True, capture_output=True)
        plots = sorted(work.glob("outputs/reports/*/table3_bars.png"))
        if not plots:
            raise SystemExit("the sweep left no report plot under outputs/reports/")
        shutil.copy(plots[-1], args.out / "report_table3_bars.png")
        port = free_port()
        uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
        server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
                                   "--port", str(port), "--workers", "1"], cwd=work, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_http(f"http://127.0.0.1:{port}/health")
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=uri)
            exp = client.get_experiment_by_name("t2exp")
            children = [r.info.run_id for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
            base = f"http://127.0.0.1:{port}/#"
            runs = urllib.parse.quote(json.dumps(children))
            for name, url in (("mlflow_runs.png", f"{base}/experiments/{exp.experiment_id}/runs"),
                              ("mlflow_compare.png", f"{base}/compare-runs?runs={runs}&experiments=%5B%22{exp.experiment_id}%22%5D")):
                subprocess.run([args.browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                "--window-size=1600,1000", "--virtual-time-budget=20000", f"--screenshot={args.out / name}", url],
                               check=True, capture_output=True, timeout=300)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote mlflow_runs.png, mlflow_compare.png and report_table3_bars.png in {args.out}")


if __name__ == "__main__":
    main()
