"""The documentation's pictures, taken from a real browser with a fresh profile (what a new user
sees, not a hand-navigated page).

    python scripts/screenshots.py [--out docs/img] [--browser chromium]

In an empty temporary directory it runs a two-cell sweep with the offline 0.5B generator
(``-m rag_method=bm25f,hybrid generator=qwen_coder_0_5b dataset.limit=2``: four questions a cell,
each with an assessed trace; the checkout's converted model is linked in, not converted again),
starts ``mlflow server`` on a free loopback port over that store, and opens five pages in
headless Chromium (Debian: ``apt-get install chromium``), each with a new, empty profile:

- ``mlflow_landing.png``: the experiment as it opens (``#/experiments/<id>``);
- ``mlflow_runs.png``: the classic runs table (the "Model training" view);
- ``mlflow_traces.png``: one cell's evaluation run, its questions (traces) with their assessments
  ("Evaluation runs" in the side bar, a run, its "Traces" tab);
- ``mlflow_compare.png``: the two cells compared question by question (the same tab, "compare to"
  the other run);
- ``mlflow_report.png``: the sweep's report, ``report/report.md`` of the parent run.

The sweep's own report plot is copied next to them as ``report_table3_bars.png``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["-m", "rag_method=bm25f,hybrid", "generator=qwen_coder_0_5b", "dataset.limit=2"]


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


def shoot(browser: str, url: str, out: Path) -> None:
    """``url`` in headless Chromium with a profile made for this picture alone."""
    with tempfile.TemporaryDirectory(prefix="t2exp-profile-") as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
                        "--window-size=1800,1000", "--virtual-time-budget=25000", f"--screenshot={out}", url],
                       check=True, capture_output=True, timeout=300)


def pages(client, experiment_id: str) -> dict[str, str]:
    """The five pages' routes (the MLflow UI's hash routes)."""
    runs = client.search_runs([experiment_id], order_by=["attributes.start_time ASC"])
    children = [r.info.run_id for r in runs if "mlflow.parentRunId" in r.data.tags and r.data.tags.get("t2exp.report") != "1"]
    (parent,) = [r.info.run_id for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    exp = f"/experiments/{experiment_id}"
    return {
        "mlflow_landing.png": exp,
        "mlflow_runs.png": f"{exp}/runs",
        "mlflow_traces.png": f"{exp}/evaluation-runs/{children[0]}/traces",
        "mlflow_compare.png": f"{exp}/evaluation-runs/{children[0]}/traces?compareToRunUuid={children[1]}",
        "mlflow_report.png": f"{exp}/runs/{parent}/artifacts/report/report.md",
    }


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
        models = ROOT / ".t2exp_cache" / "models"
        if models.is_dir():  # reuse the converted generator without naming it in the sweep's overrides
            (work / ".t2exp_cache").mkdir()
            (work / ".t2exp_cache" / "models").symlink_to(models)
        subprocess.run([sys.executable, "-m", "t2exp", *SWEEP], cwd=work, env=env, check=True, capture_output=True)
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
            for name, route in pages(client, exp.experiment_id).items():
                shoot(args.browser, f"http://127.0.0.1:{port}/#{route}", args.out / name)
                print(f"{name}: #{route}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote the pictures in {args.out}")


if __name__ == "__main__":
    main()
