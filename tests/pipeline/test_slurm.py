"""Sweeps through ``hydra/launcher=slurm`` on a real local Slurm cluster.

A sharded cell (shards=3) runs as one job array, its merge byte for byte the unsharded cell.

Start the cluster first (root, Debian): ``bash scripts/slurm_local.sh up``. The launching process
runs inside the cluster's network namespace (``scripts/in_slurm_ns.sh``), submits every cell as a
task of one Slurm job array (hydra-submitit-launcher) and waits for them; each cell is an MLflow
child run under the sweep's parent run. Skipped, with the reason, when no cluster answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from helpers.app import app_overrides
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.full]  # real processes on a real cluster

WRAPPER = ROOT / "scripts" / "in_slurm_ns.sh"
SWEEP_TIMEOUT_S = 900  # room for a 2x2 sweep on two cores with a cold cache
READY_STATES = {"idle", "mixed", "allocated", "completing"}


def _in_ns(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(WRAPPER), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _why_no_slurm() -> str | None:
    hint = "start it with `bash scripts/slurm_local.sh up` (root, Debian; T2EXP_SLURM_NS names its namespace)"
    try:
        proc = _in_ns("sinfo", "-h", "-p", "debug", "-o", "%T")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no local Slurm cluster: `in_slurm_ns.sh sinfo` failed ({exc}); {hint}"
    if proc.returncode == 3:  # the wrapper found no cluster; its message says how to start one
        return proc.stderr.strip().replace("in_slurm_ns: ", "", 1)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"local Slurm cluster not answering: `in_slurm_ns.sh sinfo` exited {proc.returncode} ({last[0]}); {hint}"
    states = proc.stdout.split()
    if not READY_STATES.intersection(states):
        return f"local Slurm cluster has no usable node in partition debug (states: {states or 'none'}); {hint}"
    return None


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    reason = _why_no_slurm()
    if reason:
        pytest.skip(reason)


def _sweep(args: list[str], cache: Path, tracking_dir: Path) -> subprocess.CompletedProcess:
    """``python -m t2exp -m ARGS hydra/launcher=slurm`` inside the cluster's namespace."""
    name = f"t2exp-test-{uuid.uuid4().hex[:8]}"
    cmd = [
        "bash",
        str(WRAPPER),
        sys.executable,
        "-m",
        "t2exp",
        "-m",
        *args,
        "hydra/launcher=slurm",
        "hydra.launcher.partition=debug",
        "hydra.launcher.cpus_per_task=1",  # two cells at once on a two-core node
        "hydra.launcher.mem_gb=1",
        "hydra.launcher.timeout_min=10",  # bounded: Slurm ends a stuck cell
        f"hydra.launcher.name={name}",
        *app_overrides(cache, tracking_dir),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    # pytest's marker variable makes MLflow switch its telemetry off; a real sweep has it on
    # (and, on an offline node, its background thread edits os.environ while the cell runs)
    env.pop("PYTEST_CURRENT_TEST", None)
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix  # the launcher's setup line activates this venv
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        _in_ns("scancel", f"--name={name}")  # leave no cells behind
        raise


def _settled_runs(tracking_dir: Path, n_children: int, timeout_s: float = 120):
    """Parent and children once no child is RUNNING any more (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        client, runs = mlflow_runs(tracking_dir)
        parents = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
        children = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
        if (len(children) >= n_children and all(r.info.status != "RUNNING" for r in children)) or time.monotonic() > deadline:
            return client, parents, children
        time.sleep(2)


def _array_job_ids(tracking_dir: Path) -> list[str]:
    scripts = sorted((tracking_dir / "multirun" / ".submitit").glob("*/*_submission.sh"))
    return [p.parent.name for p in scripts]


def _sacct_states(job_id: str, n_tasks: int, timeout_s: float = 60) -> dict[str, tuple[str, str]]:
    """{array task id: (State, ExitCode)} from Slurm accounting, once every task has ended: the
    launcher returns as soon as a cell wrote its result, while its process may still be exiting."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = _in_ns("sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,ExitCode")
        out = {}
        for line in proc.stdout.splitlines():
            jid, state, code = line.split("|")
            out[jid] = (state, code)
        ended = len(out) == n_tasks and all(s not in ("PENDING", "RUNNING", "COMPLETING") for s, _ in out.values())
        if ended or time.monotonic() > deadline:
            return out
        time.sleep(1)


def test_sweep_2x2_on_slurm_gives_four_finished_children(slurm_cluster, shared_cache, tmp_path):
    # array tasks 0-1 are bm25f (lexical: no model to load), 2-3 hybrid: two cells at once that read
    # one dense index (built by one of them unless the session's cache has it already)
    proc = _sweep(["rag_method=bm25f,hybrid", "k=3,5", "generator=none", "dataset.limit=5"], shared_cache, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    client, parents, children = _settled_runs(tmp_path, 4)
    (parent,) = parents
    assert parent.info.status == "FINISHED"
    assert len(children) == 4
    cells = set()
    for r in children:
        assert r.info.status == "FINISHED", r.data.tags.get("t2exp.error")
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        k = int(r.data.params["k"])
        cells.add((r.data.params["rag_method.name"], k))
        assert r.data.metrics["FinQA/questions"] == 5 and f"avg/mrr_at_{k}" in r.data.metrics
    assert cells == {("bm25f", 3), ("bm25f", 5), ("hybrid", 3), ("hybrid", 5)}
    # one job array on partition debug, its setup activating the venv; Slurm saw every task complete
    (job_id,) = _array_job_ids(tmp_path)
    script = (tmp_path / "multirun" / ".submitit" / job_id / f"{job_id}_submission.sh").read_text()
    assert "#SBATCH --partition=debug" in script and "#SBATCH --array=0-3" in script
    assert f'source "{sys.prefix}/bin/activate"' in script or sys.prefix == sys.base_prefix
    states = _sacct_states(job_id, 4)
    assert sorted(states) == [f"{job_id}_{i}" for i in range(4)]
    assert {s for s, _ in states.values()} == {"COMPLETED"}


def test_crashing_cell_fails_its_child_run_and_the_parent(slurm_cluster, shared_cache, tmp_path):
    # store=weaviate cannot connect (nothing listens inside the cluster's namespace): the cell
    # raises a T2ExpError after its MLflow run was opened, prints one line and exits 2
    proc = _sweep(["rag_method=base", "store=lancedb,weaviate", "generator=none", "dataset.limit=5"], shared_cache, tmp_path)
    assert proc.returncode != 0
    # submitit reports the task that died without a result (Slurm accounting: FAILED), with its stderr
    assert "UncompletedJobError" in proc.stderr and "state: FAILED" in proc.stderr
    assert "t2exp: error: store=weaviate" in proc.stderr
    client, parents, children = _settled_runs(tmp_path, 2)
    (parent,) = parents
    assert parent.info.status == "FAILED"
    assert len(children) == 2 and all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    by_store = {r.data.params["store._target_"].rsplit(".", 1)[-1]: r for r in children}
    assert by_store["LanceDBStore"].info.status == "FINISHED", by_store["LanceDBStore"].data.tags.get("t2exp.error")
    failed = by_store["WeaviateStore"]
    assert failed.info.status == "FAILED"
    assert "store=weaviate" in failed.data.tags["t2exp.error"]
    (job_id,) = _array_job_ids(tmp_path)
    states = _sacct_states(job_id, 2)
    assert states[f"{job_id}_0"] == ("COMPLETED", "0:0")
    assert states[f"{job_id}_1"] == ("FAILED", "2:0")


def test_a_cell_in_three_shards_on_slurm_equals_the_unsharded_cell(slurm_cluster, tmp_path):
    """shards=3: the cell's shards are the three tasks of one job array; the last to finish merges
    them into the cell's predictions and one FINISHED cell run (the shard runs its children), byte
    for byte the unsharded run of the same cell."""
    from helpers.app import run_app

    args = ["generator=none", "dataset.limit=6"]
    one, three = tmp_path / "one", tmp_path / "three"
    run_app(args, one / "cache", one / "track")
    proc = _sweep([*args, "shards=3"], three / "cache", three)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (job_id,) = _array_job_ids(three)
    script = (three / "multirun" / ".submitit" / job_id / f"{job_id}_submission.sh").read_text()
    assert "#SBATCH --array=0-2" in script
    assert {s for s, _ in _sacct_states(job_id, 3).values()} == {"COMPLETED"}
    (cell,) = (three / "cache" / "runs").iterdir()
    (unsharded,) = (one / "cache" / "runs").iterdir()
    assert cell.name == unsharded.name
    for name in ("predictions.jsonl", "leaderboard.jsonl"):
        assert (cell / name).read_bytes() == (unsharded / name).read_bytes(), name
    client, runs = mlflow_runs(three)
    cells = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent" and "t2exp.shard" not in r.data.tags]
    shards = [r for r in runs if "t2exp.shard" in r.data.tags]
    (cell_run,) = cells
    assert cell_run.info.status == "FINISHED", cell_run.data.tags.get("t2exp.error")
    assert sorted(r.data.tags["t2exp.shard"] for r in shards) == ["0/3", "1/3", "2/3"]
    assert all(r.info.status == "FINISHED" and r.data.tags["mlflow.parentRunId"] == cell_run.info.run_id for r in shards)
    one_client, (one_run,) = mlflow_runs(one / "track")
    metrics = [
        Path(c.download_artifacts(r.info.run_id, "metrics.json")).read_bytes() for c, r in ((client, cell_run), (one_client, one_run))
    ]
    assert metrics[0] == metrics[1]


def _t2exp_in_ns(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m t2exp ARGS`` (a command: status, collect) inside the cluster's namespace."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        ["bash", str(WRAPPER), sys.executable, "-m", "t2exp", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


def _status_when_ended(sweep_dir: Path, timeout_s: float = SWEEP_TIMEOUT_S) -> str:
    """`t2exp status` once it says every job has ended (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = _t2exp_in_ns("status", str(sweep_dir))
        assert proc.returncode == 0, proc.stderr[-2000:]
        if "every job has ended" in proc.stdout or time.monotonic() > deadline:
            return proc.stdout
        time.sleep(2)


def test_submit_and_return_then_status_and_collect(slurm_cluster, shared_cache, tmp_path):
    """hydra.launcher.wait=false: the launching process submits the job array, prints the job ids
    and the commands to follow them, and ends while the cells run; the sweep's parent run stays
    RUNNING. `t2exp status` shows each cell done or failed from MLflow and Slurm; `t2exp collect`
    logs the sweep's report on the parent run and closes it (FAILED: one cell failed)."""
    proc = _sweep(
        ["rag_method=base", "store=lancedb,weaviate", "generator=none", "dataset.limit=5", "hydra.launcher.wait=false"],
        shared_cache,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (job_id,) = _array_job_ids(tmp_path)
    sweep_dir = tmp_path / "multirun"
    assert f"submitted 2 jobs to Slurm ({job_id}_0, {job_id}_1)" in proc.stderr
    assert f"t2exp collect {sweep_dir}" in proc.stderr and f"t2exp status {sweep_dir}" in proc.stderr
    _, runs = mlflow_runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    assert parent.info.status == "RUNNING"  # nobody waits for the cells: collect closes it
    _sacct_states(job_id, 2, timeout_s=SWEEP_TIMEOUT_S)  # Slurm's accounting first: a poll costs no t2exp process
    table = _status_when_ended(sweep_dir)
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:3]}
    assert rows["0"][1:5] == ["done", f"{job_id}_0", "COMPLETED", "FINISHED"], table  # ended: Slurm saw its process exit
    assert rows["1"][1:5] == ["failed", f"{job_id}_1", "FAILED", "FAILED"], table
    assert "store=weaviate" in table and "2 jobs: 1 done, 1 failed" in table
    client, runs = mlflow_runs(tmp_path)
    assert client.get_run(parent.info.run_id).info.status == "RUNNING"  # status only reads
    done = _t2exp_in_ns("collect", str(sweep_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"1 of 2 jobs done; its report logged on parent run {parent.info.run_id}, closed FAILED" in done.stderr
    assert client.get_run(parent.info.run_id).info.status == "FAILED"
    assert "report" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    again = _t2exp_in_ns("collect", parent.info.run_id, "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert again.returncode == 0 and "already FAILED; nothing to close" in again.stderr
