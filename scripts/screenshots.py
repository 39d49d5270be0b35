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

``--only compare`` (also part of the default run) takes the pictures of docs/compare.md: the
retrieval-only sweep ``-m rag_method=base,bm25f generator=none dataset.limit=20``, then, in a
fresh profile driven by real mouse clicks (tests/helpers/browser.py), the path from the experiment page
the sweep printed at its end (``inspect: ..., then http://127.0.0.1:5000/#/experiments/<id>?workflowType=machine_learning``,
the runs view) to the answer, one picture per step and each click printed:

- ``compare_0_experiment.png``: that page as it opens: the runs table with the sweep's parent run,
  beside the MLflow Assistant panel a new browser opens (a click on its close button follows);
- ``compare_1_parent.png``: after a click on the parent run: its description's first lines;
- ``compare_2_questions.png``: after a click on the description's link to the cell's questions
  next to the best's;

then, in another fresh profile, the same from ``#/experiments/<id>`` as the experiments list
links it (MLflow 3.17 opens it on the GenAI overview behind a one-time notice:
``compare_notice.png``), its clicks counted and printed too.
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
COMPARE_SWEEP = ["-m", "rag_method=base,bm25f", "generator=none", "dataset.limit=20"]
WIDTH, HEIGHT = 1440, 900  # a common laptop screen: what the docs' clicks are counted at


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
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "--virtual-time-budget=25000",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )


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


def mlflow_server(work: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    """``mlflow server`` on a free loopback port over ``work``'s store: (process, URL, store URI)."""
    port = free_port()
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_http(f"http://127.0.0.1:{port}/health")
    return server, f"http://127.0.0.1:{port}", uri


def inspection_pictures(browser: str, out: Path, env: dict[str, str]) -> None:
    """The five pages of the MLflow UI docs (getting-started.md) and the report plot."""
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
        shutil.copy(plots[-1], out / "report_table3_bars.png")
        server, url, uri = mlflow_server(work, env)
        try:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=uri)
            exp = client.get_experiment_by_name("t2exp")
            for name, route in pages(client, exp.experiment_id).items():
                shoot(browser, f"{url}/#{route}", out / name)
                print(f"{name}: #{route}")
        finally:
            server.terminate()
            server.wait(timeout=30)


def printed_page(sweep_stdout: str) -> str:
    """The experiment page's address the sweep's end printed (``inspect: ..., then <address>``),
    as a route of the UI (``#/experiments/<id>?...``)."""
    lines = [ln for ln in sweep_stdout.splitlines() if "inspect: " in ln and ", then http" in ln]
    if not lines:
        raise SystemExit("the sweep printed no 'inspect: ..., then <address>' line")
    return "#" + lines[-1].split(", then ", 1)[1].split()[0].split("#", 1)[1]


class ClickPath:
    """Real mouse clicks in one fresh profile, each one counted (tests/helpers/browser.py)."""

    def __init__(self, binary: str) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers.browser import Browser

        self.b = Browser(binary, width=WIDTH, height=HEIGHT)
        self.b.send("Page.enable")
        self.clicks: list[str] = []

    def click(self, text: str, selector: str) -> None:
        where = self.b.click(text, selector)
        self.clicks.append(f"{text!r} -> {where.split('#', 1)[-1]}")

    def close_assistant(self) -> None:
        """A click on the close button of MLflow's Assistant panel, which a new browser opens beside
        every page (MLflow remembers it closed)."""
        self.b.wait_text("MLflow Assistant")
        self.click("Close", "button")

    def parent(self) -> None:
        """A click on the sweep's parent run in the runs table; its description's first lines
        scrolled into view, as the reader scrolls to them."""
        self.b.wait_text("sweep rag_method")
        name = self.b.js("[...document.querySelectorAll('a')].map(a => a.innerText.trim()).find(t => t.startsWith('sweep '))")
        self.click(str(name), "a")
        self.b.wait_text("Sweep report")
        self.b.js(
            "[...document.querySelectorAll('a')].find(a => a.innerText.trim() === \"its questions next to the best's\")"
            "?.scrollIntoView({block: 'center'})"
        )

    def questions(self) -> None:
        """A click on the parent's link to the cell's questions next to the best's."""
        self.click("its questions next to the best's", "a")
        self.b.wait_text("mrr_at_3")

    def close(self) -> None:
        self.b.close()


def click_path(binary: str, url: str, page: str, out: Path) -> list[str]:
    """From the experiment page the sweep printed to a cell's questions next to the best's, by real
    clicks in a fresh profile; a picture before the first click and after each. Returns the clicks."""
    c = ClickPath(binary)
    try:
        c.b.goto(f"{url}/{page}")
        c.b.wait_text("sweep rag_method")
        if c.b.js("document.body.innerText.includes('Got it')"):
            raise SystemExit(f"{page}: MLflow's notice is on the page")
        c.b.shot(out / "compare_0_experiment.png")
        c.close_assistant()
        c.parent()
        c.b.shot(out / "compare_1_parent.png")
        c.questions()
        c.b.shot(out / "compare_2_questions.png")
    finally:
        c.close()
    return c.clicks


def bare_click_path(binary: str, url: str, experiment_id: str, out: Path) -> list[str]:
    """The same from ``#/experiments/<id>`` as MLflow opens it in a fresh profile (the experiments
    list links there): its GenAI overview behind the one-time "Detect Issues" notice (a picture),
    then Got it and Model training before the same two clicks. Returns the clicks."""
    c = ClickPath(binary)
    try:
        c.b.goto(f"{url}/#/experiments/{experiment_id}")
        c.b.wait_text("Got it")
        c.b.shot(out / "compare_notice.png")
        c.click("Got it", "button")
        c.close_assistant()
        c.click("Model training", "a, button, [role=button], [role=tab], [role=radio], label, span")
        c.parent()
        c.questions()
    finally:
        c.close()
    return c.clicks


COMPARE_PICTURES = ("compare_0_experiment.png", "compare_1_parent.png", "compare_2_questions.png", "compare_notice.png")


def shrink(path: Path, colors: int = 128) -> None:
    """A screenshot as a palette PNG (about a third of the bytes; the pages are flat colours)."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
    small.save(path, "PNG", optimize=True)


def compare_pictures(browser: str, out: Path, env: dict[str, str]) -> None:
    """docs/compare.md's pictures: a retrieval-only two-cell sweep and the click paths."""
    with tempfile.TemporaryDirectory(prefix="t2exp-compare-") as tmp:
        work = Path(tmp)
        sweep = subprocess.run(
            [sys.executable, "-m", "t2exp", *COMPARE_SWEEP], cwd=work, env=env, check=True, capture_output=True, text=True
        )
        page = printed_page(sweep.stdout)
        server, url, uri = mlflow_server(work, env)
        try:
            from mlflow.tracking import MlflowClient

            exp = MlflowClient(tracking_uri=uri).get_experiment_by_name("t2exp")
            paths = {
                f"the experiment page the sweep printed ({page})": click_path(browser, url, page, out),
                f"#/experiments/{exp.experiment_id} as MLflow opens it": bare_click_path(browser, url, exp.experiment_id, out),
            }
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name in COMPARE_PICTURES:
        shrink(out / name)
    for start, clicks in paths.items():
        print(f"{len(clicks)} clicks from {start}:")
        for i, c in enumerate(clicks, 1):
            print(f"  {i}. {c}")


def explore_picture(browser: str, out: Path, env: dict[str, str]) -> None:
    """docs/compare.md's picture of ``t2exp explore``'s page (``explore.png``, 1440 px wide): the
    page the retrieval-only two-cell sweep writes beside its report, opened from ``file://`` with
    the network shut off, "cells disagree" ticked and the first question clicked."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.browser import Browser

    with tempfile.TemporaryDirectory(prefix="t2exp-explore-") as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, "-m", "t2exp", *COMPARE_SWEEP], cwd=work, env=env, check=True, capture_output=True)
        (page,) = work.glob("outputs/reports/*/explore.html")
        b = Browser(browser, width=WIDTH, height=HEIGHT, offline=True)
        try:
            b.goto(page.as_uri())
            b.wait_text("cells disagree")
            b.click("cells disagree", "label")
            b.js("document.querySelector('.row > div:nth-child(3)').click()")
            b.wait_text("retrieved ids")
            b.shot(out / "explore.png")
        finally:
            b.close()
    shrink(out / "explore.png")
    print("explore.png: the explorer page of the sweep " + " ".join(COMPARE_SWEEP[1:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium")
    ap.add_argument(
        "--only",
        choices=("all", "inspection", "compare", "explore"),
        default="all",
        help="inspection: the MLflow UI pages of getting-started.md; compare: the click path of compare.md; "
        "explore: the explorer page of compare.md",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_PROGRESS": "0"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    if args.only in ("all", "inspection"):
        inspection_pictures(args.browser, args.out, env)
    if args.only in ("all", "compare"):
        compare_pictures(args.browser, args.out, env)
    if args.only in ("all", "explore"):
        explore_picture(args.browser, args.out, env)
    print(f"wrote the pictures in {args.out}")


if __name__ == "__main__":
    main()
