"""``t2exp report`` on real sweeps: tables equal the children's logged metrics."""

from __future__ import annotations

import csv
import html
import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.app import run_app
from helpers.command import cli
from helpers.tracking import logged_sweep, mlflow_runs, seed_tracking
from t2exp.evaluation.metrics import reciprocal_rank

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _report(*args: str) -> subprocess.CompletedProcess:
    from t2exp.cli.report import main

    proc = cli(main, list(args), prog="t2exp report")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _assert_png(path: Path) -> None:
    import matplotlib.image

    assert path.is_file() and path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def _split(runs):
    parents = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


@pytest.fixture(scope="module")
def method_sweep(shared_cache, tmp_path_factory):
    tracking = tmp_path_factory.mktemp("report_sweep")
    run_app(["-m", "rag_method=base,hybrid", "generator=none", "dataset.limit=10"], shared_cache, tracking)
    return tracking


@pytest.mark.slow
def test_report_on_parent_run_equals_child_metrics(method_sweep, tmp_path):
    client, runs = mlflow_runs(method_sweep)
    (parent,), children = _split(runs)
    assert len(children) == 2
    made = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report.md", "table3.csv", "table3_bars.png"} <= made  # logged by the sweep's end, before any command
    out = tmp_path / "report"
    uri = f"sqlite:///{method_sweep / 'mlflow.db'}"
    _report(parent.info.run_id, "--tracking-uri", uri, "--out", str(out))

    rows = {r["run_id"]: r for r in _csv(out / "table3.csv")}
    assert set(rows) == {c.info.run_id for c in children}
    md = (out / "table3.md").read_text(encoding="utf-8")
    assert "| Generator | RAG method | FinQA MRR@3 | TAT-DQA MRR@3 | Avg MRR@3 | Δ vs best | p | p (Holm, m=1) |" in md
    for child in children:
        m, row = child.data.metrics, rows[child.info.run_id]
        assert row["rag_method"] == child.data.params["rag_method.name"] and row["generator"] == "none"
        for subset in ("FinQA", "TAT-DQA", "avg"):
            for suffix in ("", "_ci_low", "_ci_high"):
                key = f"{subset}/mrr_at_3{suffix}"
                assert float(row[key]) == m[key], key  # exact: the CSV holds the logged float
            key = f"{subset}/mrr_at_3"
            cell = f"{m[key]:.1f} [{m[key + '_ci_low']:.1f}, {m[key + '_ci_high']:.1f}]"
            line = next(x for x in md.splitlines() if x.startswith(f"| none | {child.data.params['rag_method.name']} |"))
            assert cell in line.split(" | "), (cell, line)
        assert not any(k.startswith("FinQA/nm") for k in row)  # retrieval only: NM column left out
    # Δ vs best: the best row says so; the other is compared on the 20 shared questions
    best = max(children, key=lambda c: c.data.metrics["avg/mrr_at_3"])
    other = next(c for c in children if c is not best)
    assert rows[best.info.run_id]["delta_vs_baseline"] == "0.0"
    delta = float(rows[other.info.run_id]["delta_vs_baseline"])
    assert delta == pytest.approx(other.data.metrics["avg/mrr_at_3"] - best.data.metrics["avg/mrr_at_3"], abs=1e-3)  # logged: 4 decimals
    assert rows[other.info.run_id]["delta_n"] == "20" and 0 < float(rows[other.info.run_id]["delta_p"]) <= 1
    assert "| best |" in md

    _assert_png(out / "table3_bars.png")
    assert not (out / "table4.csv").exists()  # no embedder in the sweep
    logged = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report.md", "table3.md", "table3.csv", "table3_bars.png"} <= logged


@pytest.mark.slow
def test_report_on_experiment_makes_a_report_run(method_sweep, tmp_path):
    uri = f"sqlite:///{method_sweep / 'mlflow.db'}"
    for i in range(2):  # a second report must not count the first report run as a result
        _report("t2exp", "--tracking-uri", uri, "--out", str(tmp_path / f"r{i}"))
        assert len(_csv(tmp_path / f"r{i}" / "table3.csv")) == 2
    client, runs = mlflow_runs(method_sweep)
    reports = [r for r in runs if r.data.tags.get("t2exp.report") == "1"]
    assert len(reports) == 2 and all(r.info.run_name == "report" and r.info.status == "FINISHED" for r in reports)
    logged = {Path(a.path).name for a in client.list_artifacts(reports[0].info.run_id, "report")}
    assert {"report.md", "table3.csv", "table3_bars.png"} <= logged


@pytest.mark.slow
def test_corpus_size_and_embedder_sweep(shared_cache, tmp_path):
    tracking = tmp_path / "track"
    run_app(
        [
            "-m",
            "dataset.corpus_size=20,40",
            "dataset.corpus_seed=0,1",
            "embedder=minilm",
            "rag_method=base",
            "generator=none",
            "dataset.limit=null",
            "k=5",
        ],
        shared_cache,
        tracking,
    )
    client, runs = mlflow_runs(tracking)
    (parent,), children = _split(runs)
    assert len(children) == 4
    out = tmp_path / "report"
    uri = f"sqlite:///{tracking / 'mlflow.db'}"
    _report(parent.info.run_id, "--tracking-uri", uri, "--out", str(out), "--k", "3", "--no-log")

    # Table 4 layout (the sweep sets the embedder): R@1, R@5, MRR@5 as logged (k=5)
    t4 = {r["run_id"]: r for r in _csv(out / "table4.csv")}
    for c in children:
        row = t4[c.info.run_id]
        assert row["embedder"] == "minilm"
        params = c.data.params
        assert (row["dataset.corpus_size"], row["dataset.corpus_seed"]) == (params["dataset.corpus_size"], params["dataset.corpus_seed"])
        for subset in ("FinQA", "TAT-DQA", "avg"):
            for metric in ("recall_at_1", "recall_at_5", "mrr_at_5"):
                assert float(row[f"{subset}/{metric}"]) == c.data.metrics[f"{subset}/{metric}"]
    _assert_png(out / "table4_bars.png")

    # --k 3 on k=5 runs: MRR@3 is not logged, so it is recomputed from predictions.jsonl (marked †)
    t3 = {r["run_id"]: r for r in _csv(out / "table3.csv")}
    c0 = children[0]
    path = Path(client.download_artifacts(c0.info.run_id, "predictions.jsonl", str(tmp_path)))
    preds = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    finqa = [reciprocal_rank(p["retrieved"], p["context_id"], 3) for p in preds if p["subset"] == "FinQA"]
    assert float(t3[c0.info.run_id]["FinQA/mrr_at_3"]) == pytest.approx(100 * sum(finqa) / len(finqa))
    assert "†" in (out / "table3.md").read_text(encoding="utf-8")

    # MRR@3 vs corpus size: mean ± std over the two seeds of each size
    curve = _csv(out / "corpus_size.csv")
    assert {(r["subset"], r["corpus_size"]) for r in curve} == {(s, n) for s in ("FinQA", "TAT-DQA") for n in ("20", "40")}
    for r in curve:
        vals = [
            float(t3[c.info.run_id][f"{r['subset']}/mrr_at_3"])
            for c in children
            if c.data.params["dataset.corpus_size"] == r["corpus_size"]
        ]
        assert float(r["mrr_at_3_mean"]) == pytest.approx(statistics.fmean(vals))
        assert float(r["mrr_at_3_std"]) == pytest.approx(statistics.stdev(vals))
        assert float(r["documents"]) == float(r["corpus_size"]) and r["n_runs"] == "2"
    _assert_png(out / "corpus_size_mrr_at_3.png")
    # --no-log: the parent keeps the report the sweep's end logged (k=5), not this --k 3 one
    logged = Path(client.download_artifacts(parent.info.run_id, "report/table3.csv", str(tmp_path / "dl")))
    head = logged.read_text(encoding="utf-8").splitlines()[0]
    assert "FinQA/mrr_at_5" in head and "mrr_at_3" not in head


@pytest.mark.slow
def test_protocol_sweep_gets_the_readings_table(shared_cache, tmp_path):
    """`-m protocol=t2exp,paper`: one row per (rag_method, protocol); every cell is the child's
    logged metric, the paper-order columns included, and the two protocols really differ."""
    tracking = tmp_path / "track"
    run_app(["-m", "protocol=t2exp,paper", "rag_method=hybrid", "generator=none", "dataset.limit=10"], shared_cache, tracking)
    client, runs = mlflow_runs(tracking)
    (parent,), children = _split(runs)
    assert sorted(c.data.params["protocol.name"] for c in children) == ["paper", "t2exp"]
    out = tmp_path / "report"
    _report(parent.info.run_id, "--tracking-uri", f"sqlite:///{tracking / 'mlflow.db'}", "--out", str(out), "--no-log")
    rows = {r["run_id"]: r for r in _csv(out / "readings.csv")}
    assert set(rows) == {c.info.run_id for c in children}
    for child in children:
        m, row = child.data.metrics, rows[child.info.run_id]
        assert row["protocol"] == child.data.params["protocol.name"] and row["rag_method"] == "hybrid"
        for key in (
            "FinQA/mrr_at_3",
            "FinQA/mrr_at_3_paper_order",
            "avg/mrr_at_3_paper_order",
            "avg/recall_at_1_paper_order",
            "avg/recall_at_5",
            "avg/recall_at_1",
        ):
            assert float(row[key]) == m[key], key
    md = (out / "readings.md").read_text(encoding="utf-8")
    assert "| RAG method | Protocol | FinQA MRR@3 | FinQA MRR@3 (paper order) |" in md
    by = {c.data.params["protocol.name"]: c.data.metrics for c in children}
    assert by["paper"]["avg/mrr_at_3"] != by["t2exp"]["avg/mrr_at_3"]  # the instruction, BM25 and fusion changed


# --- bad targets and outputs: one line, exit 2, nothing written outside its folder (a store made by hand)
def _store(tmp_path: Path, experiment: str = "t2exp"):
    from mlflow.tracking import MlflowClient

    seed_tracking(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    return client, uri, client.create_experiment(experiment)


def _finished_run(client, exp_id: str, **tags: str) -> str:
    run = client.create_run(exp_id, run_name="base-minilm-none-k3", tags=tags)
    client.log_param(run.info.run_id, "rag_method.name", "base")
    client.log_metric(run.info.run_id, "avg/mrr_at_3", 50.0)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _report_fails(tmp_path: Path, *args: str) -> str:
    from t2exp.cli.report import main

    proc = cli(main, list(args), prog="t2exp report", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    return line


def test_a_sweep_with_no_finished_cell_is_one_line_not_an_empty_report(tmp_path):
    """A sweep whose cells all FAILED or were KILLED stops with one error line naming the sweep,
    not exit 0 with a report of 0 runs."""
    client, uri, exp_id = _store(tmp_path)
    parent = client.create_run(exp_id, run_name="sweep-x", tags={"t2exp.sweep": "parent"}).info.run_id
    for status in ("FAILED", "KILLED"):
        child = client.create_run(exp_id, run_name="cell", tags={"mlflow.parentRunId": parent})
        client.set_terminated(child.info.run_id, status)
    line = _report_fails(tmp_path, parent, "--tracking-uri", uri)
    assert line.startswith(
        f"t2exp report: error: sweep 'sweep-x' (parent run {parent}, experiment 't2exp'): no cell "
        "finished (1 FAILED, 1 KILLED); nothing to report: run the sweep again"
    ), line
    assert not (tmp_path / "outputs").exists()
    assert not client.list_artifacts(parent)  # no empty report logged on the parent either


def test_out_that_is_a_file_is_one_line(tmp_path):
    client, uri, exp_id = _store(tmp_path)
    _finished_run(client, exp_id)
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    line = _report_fails(tmp_path, "t2exp", "--tracking-uri", uri, "--out", str(afile), "--no-log")
    assert (
        line == f"t2exp report: error: --out {afile}: a file, not a folder; give a folder for the report's files (it is made when missing)"
    )
    assert afile.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(("experiment", "folder"), [("..", "_.."), ("../../escaped", "_.._.._escaped"), (".", "_.")])
def test_an_experiment_name_is_one_folder_under_outputs_reports(tmp_path, experiment, folder):
    """An experiment named `..` wrote its report into outputs/ (and `.` into outputs/reports/ itself)."""
    from t2exp.cli.report import main

    client, uri, exp_id = _store(tmp_path / "track", experiment)
    _finished_run(client, exp_id)
    work = tmp_path / "work"
    work.mkdir()
    proc = cli(main, [experiment, "--tracking-uri", uri, "--no-log"], prog="t2exp report", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert written and all(p.startswith(f"outputs/reports/{folder}/") for p in written), written


def _exact_sign_flip_p(diffs: list[float]) -> float:
    """By hand: every sign pattern of the non-zero differences (a zero's sign changes nothing),
    the share whose |sum| reaches the observed |sum|."""
    import itertools

    nz = [d for d in diffs if d != 0]
    observed = abs(sum(nz))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, nz, strict=True))) >= observed - 1e-9 for signs in itertools.product((1, -1), repeat=len(nz))
    )
    return hits / 2 ** len(nz)


def _holm_by_hand(ps: list[float]) -> list[float]:
    """Holm written out for the test: the i-th smallest p (i from 0) times (m - i), a running
    maximum, capped at 1."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (len(ps) - i) * ps[j]))
        out[j] = running
    return out


@pytest.fixture(scope="module")
def three_cells(shared_cache, tmp_path_factory):
    """Three retrieval-only cells over the same 10 questions (5 per subset): 2**10 sign patterns,
    so `--n-boot 1024` makes every permutation p exact."""
    tracking = tmp_path_factory.mktemp("three_cells")
    run_app(["-m", "rag_method=bm25,bm25f,oracle", "generator=none", "dataset.limit=5"], shared_cache, tracking)
    return tracking


def _mrr(client, run_id: str, tmp_path: Path) -> dict[tuple[str, str], float]:
    path = Path(client.download_artifacts(run_id, "predictions.jsonl", str(tmp_path / run_id)))
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return {(r["subset"], r["id"]): r["mrr_at_3"] for r in rows}


def test_sweep_report_holm_corrects_the_p_values_of_every_row_against_the_baseline(three_cells, tmp_path):
    client, runs = mlflow_runs(three_cells)
    (parent,), children = _split(runs)
    uri = f"sqlite:///{three_cells / 'mlflow.db'}"
    mrr = {c.info.run_id: _mrr(client, c.info.run_id, tmp_path) for c in children}
    by_method = {c.data.params["rag_method.name"]: c.info.run_id for c in children}

    def check(out: Path, baseline_id: str, word: str) -> None:
        rows = {r["run_id"]: r for r in _csv(out / "table3.csv")}
        others = [rid for rid in rows if rid != baseline_id]
        assert rows[baseline_id]["delta_vs_baseline"] == "0.0" and len(others) == 2
        raw = [_exact_sign_flip_p([mrr[rid][q] - mrr[baseline_id][q] for q in sorted(mrr[rid])]) for rid in others]
        assert [float(rows[rid]["delta_p"]) for rid in others] == pytest.approx(raw)
        assert [float(rows[rid]["delta_p_holm"]) for rid in others] == pytest.approx(_holm_by_hand(raw))
        assert {rows[rid]["holm_m"] for rid in others} == {"2"} and {r["baseline_run_id"] for r in rows.values()} == {baseline_id}
        md = (out / "table3.md").read_text(encoding="utf-8")
        assert f"| Δ vs {word} | p | p (Holm, m=2) |" in md and f"| {word} |" in md

    _report(parent.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "best"), "--n-boot", "1024", "--no-log")
    assert by_method["oracle"] == next(r["run_id"] for r in _csv(tmp_path / "best" / "table3.csv") if r["delta_vs_baseline"] == "0.0")
    check(tmp_path / "best", by_method["oracle"], "best")
    compared = [r for r in _csv(tmp_path / "best" / "table3.csv") if r["delta_p"]]
    assert any(float(r["delta_p_holm"]) > float(r["delta_p"]) for r in compared)  # the correction changed a p

    _report(
        parent.info.run_id,
        "--tracking-uri",
        uri,
        "--out",
        str(tmp_path / "named"),
        "--n-boot",
        "1024",
        "--no-log",
        "--baseline",
        "rag_method=bm25",
        "--pairs",
    )
    check(tmp_path / "named", by_method["bm25"], "baseline")
    pairs = _csv(tmp_path / "named" / "pairs.csv")
    assert len(pairs) == 3 and {p["holm_m"] for p in pairs} == {"3"}
    raw = [_exact_sign_flip_p([mrr[p["run_id_a"]][q] - mrr[p["run_id_b"]][q] for q in sorted(mrr[p["run_id_a"]])]) for p in pairs]
    assert [float(p["p"]) for p in pairs] == pytest.approx(raw)
    assert [float(p["p_holm"]) for p in pairs] == pytest.approx(_holm_by_hand(raw))
    assert "p (Holm, m=3)" in (tmp_path / "named" / "pairs.md").read_text(encoding="utf-8")

    bad = cli(
        __import__("t2exp.cli.report", fromlist=["main"]).main,
        [parent.info.run_id, "--tracking-uri", uri, "--no-log", "--out", str(tmp_path / "bad"), "--baseline", "rag_method=hyde"],
        prog="t2exp report",
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("t2exp report: error: --baseline 'rag_method=hyde': no run")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_sweep_parent_description_links_short_named_cells_and_headline_metrics_sort_first(three_cells):
    client, runs = mlflow_runs(three_cells)
    (parent,), children = _split(runs)
    names = sorted(c.info.run_name for c in children)
    assert names == ["bm25 · minilm · k=3", "bm25f · minilm · k=3", "oracle · minilm · k=3"]
    note = parent.data.tags["mlflow.note.content"]
    exp = parent.info.experiment_id
    for c in children:  # one linked row per cell, with its logged numbers
        row = next(x for x in note.splitlines() if x.startswith(f"| [{c.info.run_name}](#/experiments/{exp}/runs/{c.info.run_id}) |"))
        assert f"{c.data.metrics['TAT-DQA/mrr_at_3']:.1f} [" in row
    assert "p (Holm, m=2)" in note and "table3_bars.png" in note
    # the lines MLflow shows of the collapsed description (which cell has the higher
    # TAT-DQA MRR@3 without "Show more"): each cell's MRR@3 per subset next to the best's
    best = max(children, key=lambda c: c.data.metrics["avg/mrr_at_3"])
    first = note.split("\n\n")[0].splitlines()
    for c in [c for c in children if c is not best]:
        line = next(x for x in first if x.startswith(f"**{c.info.run_name}** vs best **{best.info.run_name}**: MRR@3 "))
        m, b = c.data.metrics, best.data.metrics
        assert (
            f"FinQA {m['FinQA/mrr_at_3']:.1f} vs {b['FinQA/mrr_at_3']:.1f}, "
            f"TAT-DQA {m['TAT-DQA/mrr_at_3']:.1f} vs {b['TAT-DQA/mrr_at_3']:.1f}; Δ Avg "
        ) in line, line
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert "report/table3_bars.png" in logged  # the image itself: the artifact view shows it as a picture
    for c in children:
        keys = sorted(c.data.metrics)  # the MLflow runs table's column order (JavaScript's sort of the keys)
        headline = [k for k in keys if k.startswith("0_")]
        assert keys[: len(headline)] == headline == ["0_FinQA/mrr_at_3", "0_TAT-DQA/mrr_at_3", "0_avg/mrr_at_3"]
        assert all(c.data.metrics[k] == c.data.metrics[k[2:]] for k in headline)


def test_a_sweeps_own_report_goes_under_paths_work_not_the_directory_it_was_started_from(shared_cache, tmp_path):
    """The report a sweep ends with goes under `paths.work`, not the directory the sweep was started
    from (a sweep started from the checkout leaves no `outputs/reports/<parent>` there)."""
    from helpers.app import app_overrides
    from t2exp.__main__ import main

    work, elsewhere = tmp_path / "work", tmp_path / "started_here"
    elsewhere.mkdir()
    seed_tracking(work)
    proc = cli(main, ["-m", "rag_method=bm25", "generator=none", "dataset.limit=2", *app_overrides(shared_cache, work)], cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = mlflow_runs(work)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    assert (work / "outputs" / "reports" / parent.info.run_id / "report.md").is_file()
    assert list(elsewhere.iterdir()) == []


# --- names and values from runs are text, never Markdown --------------------------------------
HOSTILE_NAME = "[x](https://evil.example) <img src=x> *a*"


def _markdown_html(text: str) -> str:
    """``text`` as a CommonMark reader with GitHub's tables renders it (an independent reader)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1 \\|`*_~[]()<>&#;!:/=.-\n", max_size=14))
def test_any_text_reads_back_as_itself_in_a_table_cell_and_in_a_links_text(text):
    """:func:`t2exp.evaluation.tabular.md_escape`, read by an independent CommonMark reader: a
    table cell holds the text itself (one cell, no tag), and so does a link's text around it."""
    from t2exp.evaluation import tabular

    want = " ".join(text.split())
    cells = re.findall(r"<td>(.*?)</td>", _markdown_html(tabular.markdown(["h"], [[text]])), re.S)
    assert len(cells) == 1 and html.unescape(cells[0]) == want and "<" not in cells[0], cells
    link = re.fullmatch(r'<p>x <a href="#/r">(.*?)</a> y</p>\n', _markdown_html(f"x [{tabular.md_escape(text)}](#/r) y"), re.S)
    assert link is not None and html.unescape(link.group(1)) == want


def _hostile_sweep(tmp_path: Path) -> tuple[str, str]:
    """Two cells, one named like a Markdown link and an image, one swept value holding a ``|``;
    both with the same questions (so the Δ columns and the summary exist)."""
    cells = []
    for name, foo, rr in ((HOSTILE_NAME, "a|b", [1.0, 1.0, 0.5]), ("plain", "c", [0.5, 0.0, 0.0])):
        mean = 100 * statistics.fmean(rr)
        rows = [{"id": f"q{i}", "subset": "FinQA", "context_id": "c1", "mrr_at_3": v} for i, v in enumerate(rr)]
        metrics = {"FinQA/mrr_at_3": mean, "avg/mrr_at_3": mean}
        cells.append({"name": name, "params": {"rag_method.name": "base"}, "overrides": f"+foo={foo}", "metrics": metrics, "rows": rows})
    return logged_sweep(tmp_path, cells)


def test_a_pipe_or_a_link_in_a_name_or_value_stays_text_in_every_markdown_file(tmp_path):
    """A ``|`` in a swept value, a run name written as a link, an image or emphasis: text in the
    report's tables (the row's numbers under their own columns) and in the sweep's description."""
    from mlflow.tracking import MlflowClient

    from t2exp.evaluation.reporting.build import report

    uri, parent = _hostile_sweep(tmp_path)
    out = tmp_path / "out"
    report(parent, out, tracking_uri=uri, n_boot=50)
    description = MlflowClient(tracking_uri=uri).get_run(parent).data.tags["mlflow.note.content"]
    for text in [(out / "table3.md").read_text(encoding="utf-8"), (out / "report.md").read_text(encoding="utf-8"), description]:
        html = _markdown_html(text)
        assert "<img src=x>" not in html and 'evil.example"' not in html and "<em>" not in html, html
        assert all(href.startswith("#/experiments/") for href in re.findall(r'href="([^"]*)"', html)), html
    table = _markdown_html((out / "table3.md").read_text(encoding="utf-8"))
    head = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    assert [len(r) for r in rows] == [len(head)] * 2, (head, rows)
    by_foo = {r[head.index("foo")]: r for r in rows}
    assert by_foo["a|b"][head.index("FinQA MRR@3")] == "83.3" and by_foo["c"][head.index("FinQA MRR@3")] == "16.7"
    assert HOSTILE_NAME.replace("<", "&lt;").replace(">", "&gt;") in _markdown_html(description)


def test_a_swept_value_that_reads_as_a_formula_is_text_in_every_report_csv(tmp_path):
    """A swept value starting with ``=`` (or ``+ - @``): every CSV the report writes holds it with
    a leading ``'``, so a spreadsheet shows it instead of running it; the numbers stay numbers."""
    from t2exp.evaluation.reporting.build import report

    cells = []
    for foo, rr in (("=HYPERLINK(1)", [1.0, 1.0, 0.5]), ("@c", [0.5, 0.0, 0.0])):
        mean = 100 * statistics.fmean(rr)
        rows = [{"id": f"q{i}", "subset": "FinQA", "context_id": "c1", "mrr_at_3": v} for i, v in enumerate(rr)]
        metrics = {"FinQA/mrr_at_3": mean, "avg/mrr_at_3": mean}
        cells.append({"name": foo, "params": {"rag_method.name": "base"}, "overrides": f"+foo={foo}", "metrics": metrics, "rows": rows})
    uri, parent = logged_sweep(tmp_path, cells)
    out = tmp_path / "out"
    report(parent, out, tracking_uri=uri, n_boot=50)
    written = sorted(out.glob("*.csv"))
    assert written
    cells_seen = [c for path in written for row in csv.reader(path.open(encoding="utf-8")) for c in row]
    assert "'=HYPERLINK(1)" in cells_seen and "'@c" in cells_seen
    assert not [c for c in cells_seen if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not re.fullmatch(r"-[\d.e+-]+", c))]
    table = list(csv.DictReader((out / "table3.csv").open(encoding="utf-8")))
    assert sorted(float(r["FinQA/mrr_at_3"]) for r in table) == pytest.approx([100 / 6, 250 / 3])
