"""What a run prints where no terminal shows a bar (a pipe, a Slurm log): a line when a stage
starts, one at least every ``T2EXP_PROGRESS_EVERY`` seconds while it runs (done/total, rate,
ETA) and one when it ends; the GGUF join alike; a sharded cell's shards each say which shard
they are and only the merge says ``cell done``; ``t2exp status`` finds a sweep's parent run by
its directory however the directory is named."""

from __future__ import annotations

import logging
import re

from fakes.openai_server import FakeOpenAIServer
from helpers.app import answering_args, run_app
from helpers.command import cli
from helpers.tracking import mlflow_runs
from t2exp.infra import progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_without_a_bar_logs_its_start_then_a_line_each_interval_with_rate_and_eta(caplog, monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")  # no bar, as in a pipe
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="t2exp"):
        with progress.stage("generate FinQA", 10, "answer", clock=clock, every=30) as s:
            assert caplog.messages == ["generate FinQA: 0/10 answers"]
            clock.now = 20.0
            s.advance(2)
            s.beat()
            assert len(caplog.messages) == 1  # not 30 s yet
            clock.now = 30.0
            s.beat()
            assert caplog.messages[-1] == "generate FinQA: 2/10 answers, 15.0s/answer, ETA 2m00s"
            clock.now = 45.0
            s.advance(3)  # 15 s after the last line: none
            assert len(caplog.messages) == 2
            clock.now = 60.0
            s.advance(5)
            assert caplog.messages[-1] == "generate FinQA: 10/10 answers, 6.0s/answer, ETA 0s"
    assert caplog.messages[-1] == "generate FinQA: 10 answers in 60.0s, 6.0s/answer"


def test_a_fast_stage_gives_its_rate_per_second_and_an_unknown_total_no_eta(caplog, monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="t2exp"):
        with progress.stage("embed documents", None, "document", clock=clock, every=30) as s:
            clock.now = 40.0
            s.advance(200)
    assert caplog.messages[1] == "embed documents: 200 documents, 5.0 documents/s"


def test_a_stage_with_a_bar_logs_no_lines_while_it_runs(caplog, monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "1")  # a bar, as on a terminal
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="t2exp"):
        with progress.stage("generate FinQA", 10, "answer", clock=clock, every=30) as s:
            clock.now = 31.0
            s.advance()
            s.beat()
    assert caplog.messages == ["generate FinQA: 1 answer in 31.0s, 31.0s/answer"]


def test_an_interval_that_is_no_number_is_one_warning_and_the_default(caplog, monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    monkeypatch.setenv("T2EXP_PROGRESS_EVERY", "soon")
    with caplog.at_level(logging.INFO, logger="t2exp"):
        with progress.stage("embed documents", 2, "document", clock=Clock()) as s:
            assert s.every == 30
    assert caplog.messages[0] == "T2EXP_PROGRESS_EVERY=soon is invalid: seconds between progress lines, a number >= 0; using 30"


def test_a_run_with_a_slow_generator_prints_progress_lines_while_it_generates(shared_cache, tmp_path):
    """A real run, answers from the stand-in server slowed down: its output (no terminal) holds
    the generate stage's start line, lines with done/total, rate and ETA while answers arrive, and
    its end line."""
    with FakeOpenAIServer(model="fake-model", delay=0.3) as srv:
        proc = run_app(answering_args(srv.base_url, 4), shared_cache, tmp_path, env={"T2EXP_PROGRESS_EVERY": "0.1"})
    out = proc.stdout + proc.stderr
    assert "generate FinQA: 0/4 answers" in out, out[-3000:]
    done = [int(n) for n in re.findall(r"generate FinQA: ([0-4])/4 answers, [\d.]+ ?(?:s/answer|answers/s), ETA \S+", out)]
    assert done and done == sorted(done), out[-3000:]
    assert re.search(r"generate FinQA: 4 answers in [\d.]+s", out)


def test_the_gguf_join_reports_parts_done(tmp_path, monkeypatch, caplog):
    import hashlib
    import sys

    from t2exp.generators.local_hf import join_gguf_parts

    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    monkeypatch.setenv("T2EXP_PROGRESS_EVERY", "0")  # a line at every part
    data = b""
    for i in range(3):
        part = tmp_path / f"part{i}.bin"
        part.write_bytes(bytes([i]) * 1000)
        data += part.read_bytes()
        (tmp_path / f"gguf_part_{i}.py").write_text(f"def get_part_path():\n    return {str(part)!r}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for i in range(3):
        sys.modules.pop(f"gguf_part_{i}", None)
    with caplog.at_level(logging.INFO, logger="t2exp"):
        out = join_gguf_parts([f"gguf_part_{i}" for i in range(3)], hashlib.sha256(data).hexdigest(), len(data), tmp_path / "m.gguf")
    assert out.read_bytes() == data
    shown = [m for m in caplog.messages if m.startswith("join GGUF parts")]
    assert shown[0] == "join GGUF parts: 0/3 parts"
    assert any(re.fullmatch(r"join GGUF parts: 2/3 parts, .+, ETA \S+", m) for m in shown), shown
    assert re.fullmatch(r"join GGUF parts: 3 parts in [\d.]+s.*", shown[-1]), shown


def test_shards_say_which_shard_they_are_and_only_the_merge_says_cell_done(shared_cache, tmp_path):
    proc = run_app(["generator=none", "dataset=finqa", "dataset.limit=4", "shards=2"], shared_cache, tmp_path)
    out = proc.stdout + proc.stderr
    assert len(re.findall(r"shard [01]/2 done: bm25f · minilm · k=3: MRR@3 [\d.]+ \(MLflow run", out)) == 2, out[-3000:]
    assert len(re.findall(r"^shard [01]/2: its slice of the cell's questions; the merge gives the cell's result\nsubset ", out, re.M)) == 2
    (done,) = re.findall(r"cell done: bm25f · minilm · k=3: MRR@3 ([\d.]+) \(MLflow run ([0-9a-f]{32})\)", out)
    client, runs = mlflow_runs(tmp_path)
    cell = next(r for r in runs if r.info.run_id == done[1])
    assert "t2exp.shards" in cell.data.tags and float(done[0]) == round(cell.data.metrics["avg/mrr_at_3"], 1)
    shards = sorted(r.info.run_name for r in runs if "t2exp.shard" in r.data.tags)
    assert shards == ["bm25f · minilm · k=3 · shard 0/2", "bm25f · minilm · k=3 · shard 1/2"]


def test_status_of_a_sweep_directory_named_through_a_link_or_dotdot_finds_its_parent_run(shared_cache, tmp_path):
    """The sweep's directory given another way than the sweep recorded it (through a symbolic
    link, with ``..``): the same table as with its parent run id, parent run and job states included."""
    from t2exp.__main__ import main

    track = tmp_path / "track"
    run_app(["-m", "k=3,5", "generator=none", "dataset=finqa", "dataset.limit=2"], shared_cache, track)
    (parent,) = [r for r in mlflow_runs(track)[1] if r.data.tags.get("t2exp.sweep") == "parent"]
    by_id = cli(main, ["status", parent.info.run_id, "--tracking-uri", f"sqlite:///{track / 'mlflow.db'}"])
    assert by_id.returncode == 0 and f"2 jobs: 2 done (parent run {parent.info.run_id})" in by_id.stdout, by_id.stdout
    (tmp_path / "link").symlink_to(track)
    for other in (tmp_path / "link" / "multirun", track / "multirun" / ".." / "multirun"):
        proc = cli(main, ["status", str(other)])
        assert proc.returncode == 0 and proc.stdout.splitlines()[:-1] == by_id.stdout.splitlines()[:-1], proc.stdout + proc.stderr
