"""Sharded cells whose bookkeeping meets trouble: two `t2exp collect` at once, damaged or odd
bookkeeping files, a shard killed or never started (`t2exp status`), a shard resumed after its
merge found a question missing, a `local_parallel` worker killed by SIGKILL, and ids of any length
in error lines and notes. Each ends in the right result or one line naming the file, exit 2.

Real runs of the app (in this process unless the process itself is the subject), a real MLflow
SQLite store and a local stand-in for an OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fakes.openai_server import FakeOpenAIServer, echo_reply
from helpers.app import app_overrides, run_app
from helpers.command import cli
from helpers.tracking import mlflow_runs, seed_tracking

SMALL = ["generator=none", "dataset=finqa", "dataset.limit=2"]
RETRIEVAL = ["generator=none", "dataset.limit=6"]  # 12 questions of two subsets, every one of 3 shards some


def _main():
    from t2exp.__main__ import main

    return main


def _cell_dir(cache: Path) -> Path:
    (run_dir,) = (cache / "runs").iterdir()
    return run_dir


def _cell_runs(track: Path) -> list:
    """The cell runs of the store (not the sweep parents, not the shard runs)."""
    _, runs = mlflow_runs(track)
    return [r for r in runs if "t2exp.shards" in r.data.tags]


def _unmerged_cell(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A cell of two shards, both done, whose merge did not complete (its run closed FAILED)."""
    from mlflow.tracking import MlflowClient

    cache, track = tmp_path / "cache", tmp_path / "track"
    run_app([*SMALL, "shards=2"], cache, track)
    (cell_run,) = _cell_runs(track)
    MlflowClient(tracking_uri=f"sqlite:///{track / 'mlflow.db'}").set_terminated(cell_run.info.run_id, "FAILED")
    return cache, track, _cell_dir(cache)


def _one_error(proc, prog: str = "t2exp collect") -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{prog}: error: ")]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return line


class _Waits(logging.Handler):
    """Counts the collects that found the cell's lock held and wait for it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.waiting = threading.Semaphore(0)

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for it" in record.getMessage():
            self.waiting.release()


def test_two_collects_at_once_log_one_finished_cell_run(tmp_path):
    """Both collects start while the cell's lock is held elsewhere; once it is free, one merges
    and the other finds the cell FINISHED."""
    from t2exp.cli.collect import collect
    from t2exp.infra.cache import cell_lock, lock_name

    cache, track, cell = _unmerged_cell(tmp_path)
    waits, logger = _Waits(), logging.getLogger("t2exp")
    logger.addHandler(waits)
    said: list[str] = []
    threads = [threading.Thread(target=lambda: said.append(collect(cell))) for _ in range(2)]
    try:
        with cell_lock(cache / "locks", lock_name("cell", cell.name)):
            for t in threads:
                t.start()
            for _ in threads:
                assert waits.waiting.acquire(timeout=300), "a collect never reached the cell's lock"
        for t in threads:
            t.join(300)
    finally:
        logger.removeHandler(waits)
    assert sorted(s.split(":")[1].split()[0] for s in said) == ["already", "merged"], said
    assert [r.info.status for r in _cell_runs(track)].count("FINISHED") == 1


def _damage_done_metrics(cell: Path, track: Path) -> Path:
    done = cell / "shards" / "1-of-2" / "done.json"
    record = json.loads(done.read_text())
    del record["metrics"]
    done.write_text(json.dumps(record))
    return done


def _damage_done_run(cell: Path, track: Path) -> Path:
    done = cell / "shards" / "0-of-2" / "done.json"
    record = json.loads(done.read_text())
    done.write_text(json.dumps({**record, "run_id": "0" * 32}))
    return done


def _damage_config(cell: Path, track: Path) -> Path:
    config = cell / "shards" / "config.yaml"
    config.write_text("tracking: {uri: [unclosed\n")
    return config


@pytest.mark.parametrize("damage", [_damage_done_metrics, _damage_done_run, _damage_config], ids=["no-metrics", "unknown-run", "config"])
def test_collect_of_a_cell_with_a_damaged_file_is_one_line_naming_it(tmp_path, damage):
    cache, track, cell = _unmerged_cell(tmp_path)
    path = damage(cell, track)
    line = _one_error(cli(_main(), ["collect", str(cell)]))
    assert line.startswith(f"t2exp collect: error: {path}: "), line
    assert "run" in line.split(str(path), 1)[1]  # what to do: run a shard again


def test_resume_with_a_done_file_without_metrics_is_one_line_naming_it(tmp_path):
    cache, track, cell = _unmerged_cell(tmp_path)
    done = _damage_done_metrics(cell, track)
    proc = run_app([*SMALL, "shards=2", "resume=true"], cache, track, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert line.startswith(f"t2exp: error: {done}: "), line


def test_collect_of_a_sweep_with_a_damaged_shard_pointer_is_one_line_naming_it(tmp_path):
    cache, track = tmp_path / "cache", tmp_path / "track"
    run_app([*SMALL, "shards=2"], cache, track)
    pointer = track / "multirun" / "1" / "t2exp_shard.json"
    pointer.write_text('{"run_dir": ')
    line = _one_error(cli(_main(), ["collect", str(track / "multirun")]))
    assert line.startswith(f"t2exp collect: error: {pointer}: "), line


@pytest.mark.parametrize(
    ("record", "wanted"),
    [([], "not a record of jobs"), ({"tracking_uri": "sqlite:///x.db", "jobs": [{"num": "x", "overrides": "shard=0"}]}, "num='x'")],
    ids=["list", "num"],
)
@pytest.mark.parametrize("command", ["status", "collect"])
def test_a_damaged_jobs_file_is_one_line_naming_it(tmp_path, command, record, wanted):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "t2exp_jobs.json").write_text(json.dumps(record))
    line = _one_error(cli(_main(), [command, str(sweep)]), f"t2exp {command}")
    assert line.startswith(f"t2exp {command}: error: {sweep / 't2exp_jobs.json'}: ") and wanted in line, line


def test_status_of_a_sweep_with_a_quote_in_its_path(tmp_path):
    cache, track = tmp_path / "cache", tmp_path / "track"
    sweep = tmp_path / "it's" / "multirun"
    seed_tracking(track)
    argv = [*SMALL, "shards=2", *[o for o in app_overrides(cache, track) if not o.startswith("hydra.sweep.dir=")]]
    proc = cli(_main(), [*argv, f'hydra.sweep.dir="{sweep}"'], cwd=track)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (parent,) = [r for r in mlflow_runs(track)[1] if r.data.tags.get("t2exp.sweep") == "parent"]
    status = cli(_main(), ["status", str(sweep)])
    assert status.returncode == 0, status.stderr[-3000:]
    assert status.stdout.splitlines()[-2].endswith(f"(parent run {parent.info.run_id})"), status.stdout


def test_status_of_a_sweep_given_by_a_relative_path_finds_its_parent_run(tmp_path):
    cache, track = tmp_path / "cache", tmp_path / "track"
    run_app([*SMALL, "shards=2"], cache, track)
    (parent,) = [r for r in mlflow_runs(track)[1] if r.data.tags.get("t2exp.sweep") == "parent"]
    status = cli(_main(), ["status", "multirun"], cwd=track)
    assert status.returncode == 0, status.stderr[-3000:]
    assert f"(parent run {parent.info.run_id})" in status.stdout, status.stdout
    assert "FINISHED" in status.stdout.splitlines()[1].split(), status.stdout  # the job's run, found under the parent


def _first_shard_with_questions(limit: int, shards: int) -> bool:
    from helpers.app import compose_cfg
    from t2exp.data.loader import load_subsets, loader_args
    from t2exp.pipeline.shards import shard_index

    (finqa,) = load_subsets(**loader_args(compose_cfg("dataset=finqa", f"dataset.limit={limit}")))
    return any(shard_index(finqa.name, q.id, shards) == 0 for q in finqa.questions)


@pytest.mark.full
def test_status_of_a_killed_shard_is_unknown_and_a_shard_never_started_is_pending(tmp_path):
    """The app runs a cell's two shards one after the other; SIGKILL while shard 0 waits for its
    first answer: its run stays RUNNING with nothing left to close it, shard 1 never starts."""
    assert _first_shard_with_questions(4, 2)
    cache, track = tmp_path / "cache", tmp_path / "track"
    asked, gate = threading.Event(), threading.Event()

    def held(messages) -> str:
        asked.set()
        gate.wait(600)
        return echo_reply(messages)

    args = [
        "rag_method=oracle",
        "dataset=finqa",
        "dataset.limit=4",
        "generator=openai_compat",
        "generator.model=fake-model",
        "generator.max_concurrency=1",
        "generator.batch_size=1",
        "generator.max_retries=1",
        "shards=2",
    ]
    seed_tracking(track)
    with FakeOpenAIServer(reply=held) as srv:
        cmd = [sys.executable, "-m", "t2exp", *args, f"generator.base_url={srv.base_url}", *app_overrides(cache, track)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        env.pop("T2EXP_PARENT_RUN_ID", None)
        proc = subprocess.Popen(cmd, cwd=track, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert asked.wait(600), "shard 0 never asked"
            proc.send_signal(signal.SIGKILL)
            proc.wait(120)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait(120)
            proc.stderr.close()
    status = cli(_main(), ["status", str(track / "multirun")])
    assert status.returncode == 0, status.stderr[-3000:]
    rows = [ln.split() for ln in status.stdout.splitlines()[1:3]]
    assert [(r[0], r[1], r[-1]) for r in rows] == [("0", "unknown", "shard=0"), ("1", "pending", "shard=1")], status.stdout
    assert status.stdout.splitlines()[3].startswith("2 jobs: "), status.stdout


def test_a_resumed_shard_answers_the_questions_its_file_lacks_and_the_cell_is_merged(tmp_path):
    """A question gone from a done shard's file: the last shard's merge names it and says to run
    that shard again with resume=true; that run answers the question and merges the cell."""
    cache, track = tmp_path / "cache", tmp_path / "track"
    for i in (0, 1):
        run_app([*RETRIEVAL, "shards=3", f"shard={i}"], cache, track)
    cell = _cell_dir(cache)
    first = cell / "shards" / "0-of-3" / "predictions.jsonl"
    lines = first.read_text(encoding="utf-8").splitlines(keepends=True)
    first.write_text("".join(lines[:-1]), encoding="utf-8")
    proc = run_app([*RETRIEVAL, "shards=3", "shard=2"], cache, track, check=False)
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert proc.returncode == 2 and line.startswith(f"t2exp: error: {first}: question ") and "shard=0 shards=3 resume=true" in line
    run_app([*RETRIEVAL, "shards=3", "shard=0", "resume=true"], cache, track)
    assert first.read_text(encoding="utf-8").count("\n") == len(lines)
    assert len((cell / "predictions.jsonl").read_text(encoding="utf-8").splitlines()) == 12
    statuses = [r.info.status for r in _cell_runs(track)]
    assert statuses.count("FINISHED") == 1 and "RUNNING" not in statuses, statuses


def _kill_loky_workers() -> None:
    from t2exp.infra.signals import child_pids

    for pid in child_pids(os.getpid()):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"loky" in cmdline and b"resource_tracker" not in cmdline:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.full
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the worker processes through /proc")
def test_a_local_parallel_worker_killed_by_sigkill_is_one_line(tmp_path):
    """The stand-in server kills the sweep's worker processes (as the OOM killer would) when the
    first question reaches it."""
    killed = threading.Event()

    def kill_workers(messages) -> str:
        if not killed.is_set():
            killed.set()
            _kill_loky_workers()
        return echo_reply(messages)

    cache, track = tmp_path / "cache", tmp_path / "track"
    with FakeOpenAIServer(reply=kill_workers) as srv:
        args = [
            "rag_method=oracle",
            "dataset=finqa",
            "dataset.limit=4",
            "generator=openai_compat",
            f"generator.base_url={srv.base_url}",
            "generator.model=fake-model",
            "generator.max_retries=1",
            "shards=2",
            "hydra/launcher=local_parallel",
        ]
        proc = run_app(args, cache, track, check=False)
    assert killed.is_set() and proc.returncode == 2, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error: ")]
    assert "killed" in line and "resume=true" in line, line
    assert "TerminatedWorkerError" not in proc.stderr, proc.stderr[-3000:]  # (the stand-in server's own noise aside)


def test_ids_of_any_length_are_cut_in_collect_and_score_lines(tmp_path):
    """A predictions row whose id is megabytes long: collect's error line and score's note show
    it cut, not whole."""
    cache, track, cell = _unmerged_cell(tmp_path)
    long_id = "q" * 1_000_000
    shard = cell / "shards" / "0-of-2" / "predictions.jsonl"
    with shard.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"subset": "FinQA", "id": long_id, "prediction": ""}) + "\n")
    line = _one_error(cli(_main(), ["collect", str(cell)]))
    assert line.startswith(f"t2exp collect: error: {shard}: holds FinQA/qqq") and len(line) < len(str(shard)) + 400, line[:500]
    score = cli(_main(), ["score", str(shard), "--dataset", "finqa", "--limit", "2"])
    assert score.returncode == 0, score.stderr[-3000:]
    notes = [ln for ln in (score.stdout + score.stderr).splitlines() if "qqq" in ln]
    assert notes and all(len(ln) < 1000 for ln in notes), [ln[:300] for ln in notes]
