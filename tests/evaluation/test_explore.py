"""``t2exp explore``: the page of a real two-cell retrieval sweep (its inlined data, the questions
it marks as disagreeing, what the sweep's end logs), a hostile answer kept inside the page's data,
and the page itself in headless Chromium with the network shut off."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.app import run_app
from helpers.command import cli
from helpers.tracking import mlflow_runs

DATA = re.compile(r'<script type="application/json" id="data">(.*?)</script>', re.S)


def _explore(*args: str, cwd: Path):
    from t2exp.cli.explore import main

    return cli(main, list(args), prog="t2exp explore", cwd=cwd)


def _compare(*args: str):
    from t2exp.cli.compare import main

    return cli(main, list(args), prog="t2exp compare")


def page_data(path: Path) -> dict:
    (text,) = DATA.findall(path.read_text(encoding="utf-8"))
    return json.loads(text)


@pytest.fixture(scope="module")
def sweep(shared_cache, tmp_path_factory):
    """A real retrieval sweep of two cells over 6 questions per subset: its parent run id, the
    store's uri and folder, the cells' prediction rows and the questions `t2exp compare` lists."""
    from t2exp.evaluation.paired import load_run_predictions
    from t2exp.infra.mlflow_store import child_runs

    track = tmp_path_factory.mktemp("explore_sweep")
    run_app(["-m", "rag_method=base,bm25f", "generator=none", "dataset.limit=6"], shared_cache, track)
    uri = f"sqlite:///{track / 'mlflow.db'}"
    client, runs = mlflow_runs(track)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    parent_id = parent.info.run_id
    rows = {c.info.run_id: load_run_predictions(client, c.info.run_id) for c in child_runs(client, parent_id)}
    listed = json.loads(_compare(parent_id, "--baseline", "rag_method=base", "--tracking-uri", uri, "--format", "json").stdout)
    differ = {(q["subset"], q["id"]) for c in listed["cells"] for q in c["questions"]}
    return SimpleNamespace(parent=parent_id, uri=uri, track=track, client=client, rows=rows, differ=differ)


def test_explore_of_a_sweep_has_every_question_and_marks_those_compare_lists(sweep, tmp_path):
    proc = _explore(sweep.parent, "--baseline", "rag_method=base", "--tracking-uri", sweep.uri, "--n-boot", "200", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "outputs" / "reports" / sweep.parent / "explore.html"
    assert str(page.relative_to(tmp_path)) in proc.stdout
    data = page_data(page)
    asked = {(r["subset"], r["id"]) for rows in sweep.rows.values() for r in rows}
    assert {(q[0], q[1]) for q in data["questions"]} == asked and len(data["questions"]) == 12
    assert [c["name"].split(" · ")[0] for c in data["cells"]] == ["base", "bm25f"]
    assert sweep.differ, "the two methods rank some question differently"
    assert {(q[0], q[1]) for q in data["questions"] if q[5] > 0} == sweep.differ
    delta = data["cells"][1]["delta"]["overall"]
    assert delta[1] <= delta[0] <= delta[2] and delta[4] >= delta[3]


def test_explore_of_one_cell_run_and_of_runs_given_by_id(sweep, tmp_path):
    cell_a, cell_b = sweep.rows
    proc = _explore(cell_a, "--tracking-uri", sweep.uri, "--n-boot", "50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = page_data(tmp_path / "outputs" / "reports" / cell_a / "explore.html")
    assert len(data["cells"]) == 1 and len(data["questions"]) == len(sweep.rows[cell_a])
    out = tmp_path / "two.html"
    proc = _explore(cell_a, cell_b, "--baseline", cell_b, "--tracking-uri", sweep.uri, "--out", str(out), "--n-boot", "50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [c["run_id"] for c in page_data(out)["cells"]] == [cell_b, cell_a]


def test_the_sweep_logs_its_page_on_the_parent_run(sweep):
    logged = [a.path for a in sweep.client.list_artifacts(sweep.parent, "report")]
    assert "report/explore.html" in logged
    written = sweep.track / "outputs" / "reports" / sweep.parent / "explore.html"
    assert len(page_data(written)["questions"]) == 12


HOSTILE = '</script><script>document.title="owned"</script><!-- </SCRIPT'


def hostile_page(sweep, tmp_path: Path) -> Path:
    """The page of the sweep's two cells as files whose every answer is :data:`HOSTILE`."""
    files = []
    for i, rows in enumerate(sweep.rows.values()):
        path = tmp_path / f"cell{i}.jsonl"
        path.write_text("".join(json.dumps({**r, "answer_text": HOSTILE}) + "\n" for r in rows), encoding="utf-8")
        files.append(str(path))
    out = tmp_path / "page.html"
    proc = _explore(*files, "--out", str(out), "--n-boot", "50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return out


def test_an_answer_holding_script_end_tags_stays_data(sweep, tmp_path):
    out = hostile_page(sweep, tmp_path)
    (inlined,) = DATA.findall(out.read_text(encoding="utf-8"))
    assert "<" not in inlined and ">" not in inlined
    assert {v[1] for cell in page_data(out)["values"] for v in cell} == {HOSTILE}


def test_bad_arguments_are_one_line(sweep, tmp_path):
    proc = _explore(sweep.parent, "--metric", "accuracy", "--tracking-uri", sweep.uri, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("t2exp explore: error: --metric='accuracy' is invalid; allowed: ")
    proc = _explore(sweep.parent, "--baseline", "rag_method=hyde", "--tracking-uri", sweep.uri, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("t2exp explore: error: --baseline 'rag_method=hyde': no run ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "outputs").exists()


def test_bad_sources_are_one_line(tmp_path):
    proc = _explore(str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"t2exp explore: error: {tmp_path / 'missing.jsonl'}: no such file (give a predictions.jsonl path or an MLflow run id)"
    ]


@pytest.mark.full
def test_the_page_in_headless_chromium_lists_what_compare_lists(sweep, tmp_path):
    """The page opened from file:// with every request sent to a closed port: the rows shown under
    "cells disagree" are the questions `t2exp compare` lists, and all rows are the predictions'."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    from helpers.browser import Browser

    proc = _explore(sweep.parent, "--baseline", "rag_method=base", "--tracking-uri", sweep.uri, "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    b = Browser(binary, width=1440, height=1400, offline=True)
    try:
        b.goto((tmp_path / "explore.html").as_uri())
        b._until(lambda: b.js("document.body && document.body.dataset.ready === '1'"), 60, "the page ready")
        rows = "JSON.stringify([...document.querySelectorAll('.row')].map(r => [r.dataset.subset, r.dataset.qid]))"
        assert b.js("document.getElementById('count').textContent") == "12"
        assert len(json.loads(b.js(rows))) == 12
        b.js("document.getElementById('f-disagree').click()")
        shown = {tuple(r) for r in json.loads(b.js(rows))}
        assert shown == sweep.differ
        assert b.js("document.getElementById('count').textContent") == str(len(sweep.differ))
        b.js("document.querySelector('.row').click()")
        assert "retrieved ids" in b.js("document.getElementById('detail').innerText")
        # a page whose every answer is markup shows it as text, and runs none of it
        b.goto(hostile_page(sweep, tmp_path).as_uri())
        b._until(lambda: b.js("document.body && document.body.dataset.ready === '1'"), 60, "the hostile page ready")
        assert b.js("document.title").startswith("t2exp explore: ")
        assert b.js("document.querySelectorAll('.row').length") == 12
        b.js("document.querySelector('.row').click()")
        assert HOSTILE in b.js("document.getElementById('detail').innerText")
    finally:
        b.close()


def test_a_sweep_whose_page_cannot_be_made_warns_and_still_finishes(shared_cache, tmp_path, monkeypatch):
    """The explorer page failing at a sweep's end is one warning line; the cells, the parent run
    and its report are logged as ever."""
    from t2exp.evaluation.reporting import explore

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(explore, "explore_parent", broken)
    lines = run_app(["-m", "k=3,5", "generator=none", "dataset.limit=2"], shared_cache, tmp_path).stdout.splitlines()
    assert [line.split("] ", 1)[1] for line in lines if "explorer page" in line] == ["sweep explorer page not made: disk full"]
    assert any("] sweep done: MLflow parent run" in line for line in lines)
    client, runs = mlflow_runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    assert parent.info.status == "FINISHED" and len(runs) == 3 and all(r.info.status == "FINISHED" for r in runs)
    logged = [a.path for a in client.list_artifacts(parent.info.run_id, "report")]
    assert "report/report.md" in logged and "report/explore.html" not in logged
