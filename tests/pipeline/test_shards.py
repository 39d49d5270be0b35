"""Sharded cells (``shards=N``): the shards of a cell answer stable slices of its questions, the
last to finish (or ``t2exp collect``) merges them, and the merged cell is an unsharded run of the
same cell byte for byte: ``predictions.jsonl``, ``leaderboard.jsonl`` and ``metrics.json``, one
MLflow run for the cell with the shard runs as its children. A failed shard re-runs alone; a
missing shard or a question twice is one line naming the shard's file.

Real runs of the app (in this process; the local_parallel launcher's shards in loky worker
processes), a real MLflow SQLite store and a local stand-in for an OpenAI-compatible server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fakes.openai_server import FakeOpenAIServer
from helpers.app import answering_args, compose_cfg, run_app
from helpers.command import cli
from helpers.tracking import mlflow_runs

RETRIEVAL = ["generator=none", "dataset.limit=6"]  # 12 questions of two subsets, every shard some


def _cell_dir(cache: Path) -> Path:
    (run_dir,) = (cache / "runs").iterdir()
    return run_dir


def _artifact(client, run, name: str) -> bytes:
    return Path(client.download_artifacts(run.info.run_id, name)).read_bytes()


def _cells(track: Path):
    """The MLflow runs of the store by kind: sweep parents, cell runs, shard runs."""
    client, runs = mlflow_runs(track)
    parents = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    shards = [r for r in runs if "t2exp.shard" in r.data.tags]
    cells = [r for r in runs if r not in parents and r not in shards]
    return client, parents, cells, shards


def _same_cell(track_a: Path, track_b: Path) -> None:
    """The one FINISHED cell run of each store: the same artifacts byte for byte, the same scores."""
    client_a, _, cells_a, _ = _cells(track_a)
    client_b, _, cells_b, _ = _cells(track_b)
    (a,) = [r for r in cells_a if r.info.status == "FINISHED"]
    (b,) = [r for r in cells_b if r.info.status == "FINISHED"]
    assert a.data.tags["t2exp.cell_key"] == b.data.tags["t2exp.cell_key"]
    for name in ("predictions.jsonl", "leaderboard.jsonl", "metrics.json"):
        assert _artifact(client_a, a, name) == _artifact(client_b, b, name), name
    scores = [m for m in a.data.metrics if m.startswith(("FinQA/", "TAT-DQA/", "avg/")) and not m.endswith(("_seconds", "_cache_hit"))]
    assert scores and {m: a.data.metrics[m] for m in scores} == {m: b.data.metrics.get(m) for m in scores}


@pytest.mark.full  # real local processes
def test_three_shards_in_local_processes_equal_the_unsharded_cell_byte_for_byte(tmp_path):
    one, three = tmp_path / "one", tmp_path / "three"
    run_app(RETRIEVAL, one / "cache", one / "track")
    run_app([*RETRIEVAL, "shards=3", "hydra/launcher=local_parallel"], three / "cache", three / "track")
    cell = _cell_dir(three / "cache")
    assert cell.name == _cell_dir(one / "cache").name  # shards do not change the cell's key: one predictions directory
    sizes = [len((cell / "shards" / f"{i}-of-3" / "predictions.jsonl").read_text().splitlines()) for i in range(3)]
    assert sum(sizes) == 12 and min(sizes) > 0
    for name in ("predictions.jsonl", "leaderboard.jsonl"):
        assert (cell / name).read_bytes() == (_cell_dir(one / "cache") / name).read_bytes(), name
    _same_cell(one / "track", three / "track")
    client, parents, cells, shards = _cells(three / "track")
    (parent,) = parents
    (cell_run,) = cells
    assert parent.info.status == cell_run.info.status == "FINISHED"
    assert cell_run.data.tags["mlflow.parentRunId"] == parent.info.run_id and cell_run.data.params["shards"] == "3"
    assert sorted(r.data.tags["t2exp.shard"] for r in shards) == ["0/3", "1/3", "2/3"]
    assert all(r.info.status == "FINISHED" and r.data.tags["mlflow.parentRunId"] == cell_run.info.run_id for r in shards)
    assert cell_run.data.metrics["FinQA/questions"] == 6 and cell_run.data.metrics["TAT-DQA/questions"] == 6


def _finqa_shards(limit: int) -> list[int]:
    from t2exp.data.loader import load_subsets, loader_args
    from t2exp.pipeline.shards import shard_index

    (finqa,) = load_subsets(**loader_args(compose_cfg("dataset=finqa", f"dataset.limit={limit}")))
    return [shard_index(finqa.name, q.id, 3) for q in finqa.questions]


def test_a_failed_shard_reruns_alone_and_the_merge_equals_the_unsharded_cell(tmp_path):
    """Shards run in order (the basic launcher): the endpoint fails on shard 1's second question.
    The re-run (resume=true, the endpoint back) asks only what shard 1 left and shard 2; shard 0's
    run joins the new cell run. An unsharded run of the cell, its answers from the same LLM cache,
    is the merged cell byte for byte."""
    slices = _finqa_shards(8)
    assert slices.count(0) >= 1 and slices.count(1) >= 2
    sharded, unsharded = tmp_path / "sharded", tmp_path / "unsharded"
    with FakeOpenAIServer(script=["ok"] * (slices.count(0) + 1), default="500") as failing:
        proc = run_app([*answering_args(failing.base_url, 8), "shards=3"], sharded / "cache", sharded / "track", check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    client, _, cells, shards = _cells(sharded / "track")
    (failed_cell,) = cells
    assert failed_cell.info.status == "FAILED" and failed_cell.data.tags["t2exp.error"].startswith("shard 1 of 3: ")
    assert {r.data.tags["t2exp.shard"]: r.info.status for r in shards} == {"0/3": "FINISHED", "1/3": "FAILED"}
    with FakeOpenAIServer() as back:
        run_app([*answering_args(back.base_url, 8), "shards=3", "resume=true"], sharded / "cache", sharded / "track")
        assert len(back.requests) == len(slices) - slices.count(0) - 1  # shard 1's unanswered questions and shard 2's
    client, _, cells, shards = _cells(sharded / "track")
    (cell_run,) = [r for r in cells if r.info.status == "FINISHED"]
    children = {r.data.tags["t2exp.shard"]: r for r in shards if r.data.tags["mlflow.parentRunId"] == cell_run.info.run_id}
    assert sorted(children) == ["0/3", "1/3", "2/3"] and all(r.info.status == "FINISHED" for r in children.values())
    (unsharded / "cache").mkdir(parents=True)
    with sqlite3.connect(sharded / "cache" / "llm.sqlite") as src, sqlite3.connect(unsharded / "cache" / "llm.sqlite") as dst:
        src.backup(dst)  # a consistent copy, whatever is still in the cache's WAL
    with FakeOpenAIServer() as idle:
        run_app(answering_args(idle.base_url, 8), unsharded / "cache", unsharded / "track")
        assert idle.requests == []  # every answer from the LLM cache: the same answers, the same seconds
    _same_cell(unsharded / "track", sharded / "track")
    # its tokens: each question's once, as the server counted them, whichever attempt or shard asked it
    # (and an answer from the LLM cache counts what it cost when made)
    usage = [u for _, u in failing.answered + back.answered]
    tokens = (len(slices), sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage))
    (fresh,) = [r for r in _cells(unsharded / "track")[2] if r.info.status == "FINISHED"]
    for run in (cell_run, fresh):
        assert tuple(run.data.metrics[m] for m in ("questions", "prompt_tokens", "completion_tokens")) == tokens


def test_a_missing_shard_or_a_question_twice_is_one_line_naming_the_shard(tmp_path):
    """Shards run by hand (``shard=i``): `t2exp collect` refuses while one is missing; a question
    written twice stops the last shard's merge (its cell run FAILED); collect merges once it is mended."""
    from t2exp.__main__ import main

    cache, track = tmp_path / "cache", tmp_path / "track"
    for i in (0, 1):
        run_app([*RETRIEVAL, "shards=3", f"shard={i}"], cache, track)
    cell = _cell_dir(cache)
    assert not (cell / "predictions.jsonl").exists()  # not merged yet
    proc = cli(main, ["collect", str(cell)])
    missing = cell / "shards" / "2-of-3" / "predictions.jsonl"
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"t2exp collect: error: {missing}: shard 2 of 3 has not finished"), proc.stderr
    first = cell / "shards" / "1-of-3" / "predictions.jsonl"
    lines = first.read_text(encoding="utf-8").splitlines(keepends=True)
    first.write_text("".join([*lines, lines[0]]), encoding="utf-8")
    proc = run_app([*RETRIEVAL, "shards=3", "shard=2"], cache, track, check=False)
    assert proc.returncode == 2
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert line.startswith(f"t2exp: error: {first}: question ") and " is there twice" in line
    _, _, cells, _ = _cells(track)
    assert [r.info.status for r in cells] == ["FAILED"] and " is there twice" in cells[0].data.tags["t2exp.error"]
    first.write_text("".join(lines), encoding="utf-8")
    proc = cli(main, ["collect", str(tmp_path / "track" / "hydra")])  # the last shard job's Hydra directory
    assert proc.returncode == 0, proc.stderr
    assert "merged 3 shards into MLflow run" in proc.stderr
    rows = (cell / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 12 == len(set(rows))
    _, _, cells, shards = _cells(track)
    (done,) = [r for r in cells if r.info.status == "FINISHED"]
    assert sorted(r.data.tags["t2exp.shard"] for r in shards if r.data.tags["mlflow.parentRunId"] == done.info.run_id) == [
        "0/3",
        "1/3",
        "2/3",
    ]


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["shards=0"], "shards=0 is invalid"),
        (["shards=3", "shard=3"], "shard=3 is invalid"),
        (["shard=0"], "shard=0 is invalid"),
        (["-m", "shards=2,3"], "shards is invalid as a sweep"),
    ],
)
def test_bad_shard_settings_are_one_line(tmp_path, args, wanted):
    proc = run_app([*args, *RETRIEVAL], tmp_path / "cache", tmp_path / "track", check=False)
    assert proc.returncode == 2 and wanted in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "cache").exists()  # refused before any work


def test_more_shards_than_questions_and_collect_by_the_sweeps_parent_run(tmp_path):
    """Two questions in five shards: the shards with none record themselves done and log nothing
    (a shard with no rows once failed the run in the scorer); `t2exp collect <parent run id>`
    finds the cell through the sweep's directory and leaves the FINISHED cell alone."""
    from t2exp.__main__ import main

    cache, track = tmp_path / "cache", tmp_path / "track"
    run_app(["generator=none", "dataset=finqa", "dataset.limit=2", "shards=5"], cache, track)
    assert len((_cell_dir(cache) / "predictions.jsonl").read_text().splitlines()) == 2
    client, (parent,), (cell_run,), shards = _cells(track)
    assert cell_run.info.status == "FINISHED" and 1 <= len(shards) <= 2
    proc = cli(main, ["collect", parent.info.run_id, "--tracking-uri", f"sqlite:///{track / 'mlflow.db'}"])
    assert proc.returncode == 0 and f"already FINISHED as MLflow run {cell_run.info.run_id}" in proc.stderr, proc.stderr


def test_status_lists_every_shard_job_done_with_its_answers(tmp_path):
    """`t2exp status <sweep dir | parent run id>`: one row per job (here the two shards of a cell),
    its state from MLflow and the cache (the shard's done.json, the predictions it wrote); read-only."""
    from t2exp.__main__ import main

    cache, track = tmp_path / "cache", tmp_path / "track"
    run_app([*RETRIEVAL, "shards=2"], cache, track)
    proc = cli(main, ["status", str(track / "multirun")])
    assert proc.returncode == 0, proc.stderr
    head, *rows, total = proc.stdout.splitlines()[:4]
    assert head.split() == ["job", "state", "slurm", "mlflow", "answered", "cell"]
    cells = [r.split() for r in rows]
    assert [(c[0], c[1], c[3], c[-1]) for c in cells] == [("0", "done", "FINISHED", "shard=0"), ("1", "done", "FINISHED", "shard=1")]
    assert sum(int(c[4]) for c in cells) == 12 and total.startswith("2 jobs: 2 done (parent run ")
    _, (parent,), _, _ = _cells(track)
    by_id = cli(main, ["status", parent.info.run_id, "--tracking-uri", f"sqlite:///{track / 'mlflow.db'}"])
    assert by_id.returncode == 0 and by_id.stdout == proc.stdout
    gone = cli(main, ["status", str(tmp_path / "nowhere")])
    assert gone.returncode == 2 and gone.stderr.startswith("t2exp status: error: ") and gone.stderr.count("\n") == 1


def test_a_resumed_run_leaves_its_predictions_in_question_order(tmp_path):
    """A stopped run writes answers as they arrive (out of order under concurrency); the run that
    resumes it ends with the file in question order — the order the merge of a sharded cell writes
    — so a resumed cell, an uninterrupted one and a merged one are the same file."""
    cache, track = tmp_path / "cache", tmp_path / "track"
    args = ["generator=none", "dataset=finqa", "dataset.limit=3"]
    run_app(args, cache, track)
    path = _cell_dir(cache) / "predictions.jsonl"
    ordered = path.read_bytes()
    path.write_bytes(b"".join(reversed(ordered.splitlines(keepends=True))))  # as a stop under concurrency leaves it
    run_app(args, cache, track)
    assert path.read_bytes() == ordered
