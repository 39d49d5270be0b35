"""``t2exp status SWEEP``: where a sweep's jobs are — every job (a cell, or a shard of a sharded
cell) done, running, failed, unknown or pending, in one table.

SWEEP is a sweep directory or its MLflow parent run id. Each job's state comes from its MLflow run
(the cell's, or the shard's: matched by the job's overrides), its files in the cache (a shard's
``done.json``, the predictions written so far) and, where the sweep was submitted to Slurm and
``squeue``/``sacct`` answer, Slurm's own state of its array task. Without Slurm, a job whose run
is RUNNING while the process that ran it (on this host) is gone — killed by SIGKILL — is
``unknown``: nothing will close it; run it again with ``resume=true``. A job that has not started
(no directory yet) is listed from the sweep's ``multirun.yaml`` as pending. Read-only: ``t2exp
collect SWEEP`` merges sharded cells and closes the sweep's parent run once every job has ended.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2exp.errors import DataError, T2ExpError, command_error, one_line
from t2exp.infra.mlflow_store import move_login

SLURM_ENDED_BAD = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
STATES = ("done", "running", "failed", "unknown", "pending")


@dataclass
class Job:
    """One job of the sweep and what is known of it."""

    num: int
    overrides: str
    slurm_job: str | None = None
    slurm: str | None = None
    mlflow: str | None = None
    answered: int | None = None
    shard_done: bool = False
    gone: bool = False  # its run is RUNNING but the process that ran it has ended (this host only)

    @property
    def state(self) -> str:
        slurm = (self.slurm or "").split()[0] if self.slurm else ""
        if self.mlflow == "FINISHED" or self.shard_done:
            return "done"
        if self.mlflow in ("FAILED", "KILLED") or slurm.startswith(SLURM_ENDED_BAD):
            return "failed"
        if slurm == "COMPLETED":
            return "done"  # ended well without a run of its own (a cell skipped by resume=true)
        if slurm in ("RUNNING", "COMPLETING"):
            return "running"
        if self.mlflow == "RUNNING":  # without Slurm: killed (SIGKILL, a lost machine) if its process is gone
            return "unknown" if self.gone and not self.slurm_job else "running"
        return "pending"

    @property
    def ended(self) -> bool:
        """Done or failed, and its process gone where Slurm tells (a run closes before its process exits)."""
        live = (self.slurm or "").split()[:1] in (["PENDING"], ["RUNNING"], ["COMPLETING"], ["CONFIGURING"], ["REQUEUED"])
        return self.state in ("done", "failed") and not live


@dataclass
class Sweep:
    sweep_dir: Path
    tracking_uri: str
    parent_run: str | None
    jobs: list[Job]
    work: Path | None = None  # the sweep's paths.work (a submitted sweep's record), where its report goes

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for j in self.jobs if j.state == s) for s in STATES}

    def ended(self) -> bool:
        return bool(self.jobs) and all(j.ended for j in self.jobs)


def build_parser(prog: str = "t2exp status") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Every job of a sweep: done, running, failed or pending.")
    p.add_argument("target", metavar="SWEEP", help="a sweep directory or its MLflow parent run id")
    p.add_argument("--tracking-uri", type=move_login, help="where a parent run id is (default: the app config's tracking.uri)")
    return p


def sweep_dir_of(target: str, tracking_uri: str | None) -> Path:
    from t2exp.cli.sweep_target import sweep_path

    path = sweep_path(target, tracking_uri)
    if not path.is_dir():
        raise DataError(f"{target}: no such sweep directory; give a sweep's directory (hydra.sweep.dir) or its MLflow parent run id")
    return path


def load_sweep(sweep_dir: Path, tracking_uri: str | None = None) -> Sweep:
    """The sweep's jobs with their states (see the module's doc)."""
    from t2exp.pipeline.submit import read_jobs

    record = read_jobs(sweep_dir)
    if record is None:
        record = _record_from_job_dirs(sweep_dir, tracking_uri)
    uri = tracking_uri or str(record["tracking_uri"])
    jobs = [Job(int(j["num"]), str(j["overrides"]), j.get("slurm_job")) for j in record["jobs"]]
    parent = record.get("parent_run")
    _slurm(jobs)
    if parent:
        _mlflow(jobs, uri, str(parent))
    for job in jobs:
        _cache(job, sweep_dir)
    work = Path(str(record["work"])) if record.get("work") else None
    return Sweep(sweep_dir, uri, parent, sorted(jobs, key=lambda j: j.num), work)


def _record_from_job_dirs(sweep_dir: Path, tracking_uri: str | None) -> dict[str, Any]:
    """A sweep that waited for its jobs: its jobs from their Hydra directories, its parent from MLflow."""
    from omegaconf import OmegaConf

    from t2exp.cli.sweep_jobs import parent_run
    from t2exp.infra.hydra_internals import expected_jobs
    from t2exp.infra.mlflow_store import open_client
    from t2exp.infra.redaction import redact_overrides

    dirs = sorted(
        (d for d in sweep_dir.iterdir() if d.name.isdigit() and (d / ".hydra" / "overrides.yaml").is_file()), key=lambda d: int(d.name)
    )
    jobs = dict(enumerate(" ".join(redact_overrides(job)) for job in expected_jobs(sweep_dir)))  # the ones not started as well
    jobs.update({int(d.name): " ".join(redact_overrides(list(OmegaConf.load(d / ".hydra" / "overrides.yaml")))) for d in dirs})
    if not jobs:
        raise DataError(
            f"{sweep_dir}: no job of a sweep there (no t2exp_jobs.json, no multirun.yaml, no <n>/.hydra/overrides.yaml); "
            "give the directory a sweep printed (hydra.sweep.dir)"
        )
    config = dirs[0] / ".hydra" / "config.yaml" if dirs else sweep_dir / "multirun.yaml"
    uri = tracking_uri or str(OmegaConf.load(config).tracking.uri)
    parent = parent_run(open_client(uri, "--tracking-uri" if tracking_uri else "tracking.uri", create=False), sweep_dir)
    return {"tracking_uri": uri, "parent_run": parent, "jobs": [{"num": n, "overrides": o} for n, o in sorted(jobs.items())]}


def _slurm(jobs: list[Job]) -> None:
    """Each submitted job's Slurm state: ``squeue`` for the queued and running, ``sacct`` for the ended."""
    ids = sorted({j.slurm_job.split("_")[0] for j in jobs if j.slurm_job})
    if not ids:
        return
    states: dict[str, str] = {}
    for cmd in (
        ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(ids)],
        ["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(ids)],
    ):  # squeue last: the live state wins
        if shutil.which(cmd[0]) is None:
            continue
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in out.splitlines():
            job_id, _, state = line.partition("|")
            if state and "[" not in job_id:
                states[job_id.strip()] = state.strip()
    for job in jobs:
        job.slurm = states.get(job.slurm_job or "")


def _mlflow(jobs: list[Job], uri: str, parent: str) -> None:
    """Each job's run: a child of the parent run (a cell) or of a cell run (a shard), by its overrides."""
    from t2exp.infra.mlflow_store import Tag, child_runs, open_client
    from t2exp.tracking.inspection import process_gone

    client = open_client(uri, create=False)
    try:
        cells = child_runs(client, parent)
        runs = cells + [shard for cell in cells if Tag.SHARDS in cell.data.tags for shard in child_runs(client, cell.info.run_id)]
    except Exception as exc:
        raise T2ExpError(
            f"tracking.uri={uri}: the sweep's runs could not be read ({one_line(exc, 160)}); "
            "check the tracking server and pass --tracking-uri"
        ) from None
    by_overrides: dict[str, Any] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):  # the latest attempt wins
        by_overrides[run.data.tags.get(Tag.OVERRIDES, "")] = run
    for job in jobs:
        found = by_overrides.get(job.overrides)
        job.mlflow = found.info.status if found is not None else None
        job.gone = found is not None and found.info.status == "RUNNING" and process_gone(found.data.tags)
        if found is not None and found.info.status == "FINISHED":
            asked = [v for k, v in found.data.metrics.items() if k.endswith("/questions") and not k.startswith("avg/")]
            job.answered = int(sum(asked)) if asked else None


def _cache(job: Job, sweep_dir: Path) -> None:
    """A shard's ``done.json`` and the predictions written so far (the job's Hydra dir names its shard)."""
    from t2exp.pipeline.shards import POINTER_FILE, Layout, read_pointer

    pointer = sweep_dir / str(job.num) / POINTER_FILE
    if not pointer.is_file():
        return
    try:
        p = read_pointer(pointer)
        layout = Layout(p["run_dir"], p["shards"])
        job.shard_done = layout.done(p["shard"]).is_file()
        preds = layout.predictions(p["shard"])
        job.answered = sum(1 for _ in preds.open(encoding="utf-8")) if preds.is_file() else 0
    except (OSError, DataError):  # a damaged pointer (collect names it), a file gone: the other sources still tell
        return


def table(sweep: Sweep) -> str:
    from t2exp.evaluation.tabular import MISSING, aligned

    head = ["job", "state", "slurm", "mlflow", "answered", "cell"]
    common = set.intersection(*(set(j.overrides.split()) for j in sweep.jobs)) if len(sweep.jobs) > 1 else set()
    rows = [
        [
            str(j.num),
            j.state,
            f"{j.slurm_job or MISSING} {j.slurm or ''}".strip(),
            j.mlflow or MISSING,
            MISSING if j.answered is None else str(j.answered),
            " ".join(o for o in j.overrides.split() if o not in common) or MISSING,
        ]
        for j in sweep.jobs
    ]
    counts = ", ".join(f"{n} {s}" for s, n in sweep.counts().items() if n)
    return f"{aligned(head, rows, left={0, 1, 2, 3, 5})}\n{len(sweep.jobs)} jobs: {counts} (parent run {sweep.parent_run or MISSING})"


def main(argv: Sequence[str] | None = None, prog: str = "t2exp status") -> int:
    args = build_parser(prog).parse_args(argv)
    from t2exp import config

    config.register()
    try:
        sweep = load_sweep(sweep_dir_of(args.target, args.tracking_uri), args.tracking_uri)
    except T2ExpError as exc:
        return command_error(prog, exc)
    print(table(sweep))
    if sweep.ended():
        print(f"every job has ended: `t2exp collect {sweep.sweep_dir}` merges what is left and closes the sweep's parent run")
    return 0
