"""The MLflow run of a sharded cell: one per attempt, opened by its first shard (the others, and
``t2exp collect``, find it), the shards' runs its children, closed by the merge. A shard run
carries ``t2exp.shard`` (``i/N``) and ``t2exp.shard_of``, never the cell key: a finished shard is
never taken for a finished cell, and reports list the cell, not its shards."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t2exp.infra.cache import build_lock, lock_name
from t2exp.infra.mlflow_store import Tag, cell_runs, open_client, run_status
from t2exp.tracking.cell_log import start_run
from t2exp.tracking.mlflow_run import PARENT_ENV, Tracker, ensure_tracking

log = logging.getLogger("t2exp")


def open_cell_run(
    tracking: Mapping[str, Any],
    key: str,
    shards: int,
    name: str,
    tags: dict[str, str],
    *,
    lock_dir: Path,
    params: Mapping[str, Any],
    subsets: Any,
    any_parent: bool = False,
) -> str:
    """The id of this attempt's RUNNING cell run (same key, same number of shards, same sweep
    parent; ``any_parent``: any), created with ``params`` and ``subsets`` as its inputs when there
    is none. Under a file lock: the shards of one attempt share one run."""
    uri, experiment, art = str(tracking["uri"]), str(tracking["experiment"]), tracking.get("artifact_location")
    with build_lock(lock_dir, lock_name("cell", key, "run"), timeout=600):
        exp_id = ensure_tracking(uri, experiment, art)
        parent = os.environ.get(PARENT_ENV) or None
        for run in cell_runs(open_client(uri), exp_id, key, "RUNNING", shards):
            if any_parent or run.data.tags.get("mlflow.parentRunId") == parent:
                return str(run.info.run_id)
        tracker = start_run(tracking, name, {**tags, Tag.SHARDS: str(shards)}, params, subsets)
        log.info("MLflow run %s is the cell's, sharded %d ways; each shard logs a child run", tracker.run_id, shards)
        return tracker.run_id


def end_cell_run(uri: str, run_id: str, status: str, error: str | None = None) -> None:
    """Close the cell run (a shard failed or was stopped: FAILED or KILLED), noting why."""
    tracker = Tracker.attach(uri, run_id)
    if error:
        tracker.set_tags({Tag.ERROR: error[:2000]})
    tracker.finish(status)


def adopt(uri: str, cell_run_id: str, shard_runs: Mapping[str, Path]) -> None:
    """Make ``shard_runs`` (from this attempt or an earlier one; each with the ``done.json`` that
    names it) children of the cell's run ``cell_run_id``."""
    from t2exp.errors import DataError, one_line

    client = open_client(uri)
    for run_id, done in shard_runs.items():
        if run_status(client, run_id) is None:
            raise DataError(
                f"{done}: names shard run {one_line(run_id, 40)}, which is not in the cell's MLflow store (tracking.uri); "
                f"delete {done.name} and run that shard again with resume=true: its answers are kept"
            )
        client.set_tag(run_id, "mlflow.parentRunId", cell_run_id)


def is_running(uri: str, run_id: str) -> bool:
    """``run_id`` is RUNNING (False for a run this store does not hold)."""
    return run_status(open_client(uri), run_id) == "RUNNING"


def is_finished(uri: str, run_id: str) -> bool:
    return run_status(open_client(uri), run_id) == "FINISHED"


def close_stale(uri: str, experiment_id: str, key: str, shards: int, keep: str) -> None:
    """Other cell runs of this cell still RUNNING (attempts whose shard was killed before it could
    close them): KILLED, naming the run that completed the cell."""
    client = open_client(uri)
    for run in cell_runs(client, experiment_id, key, "RUNNING", shards):
        if run.info.run_id != keep:
            client.set_tag(run.info.run_id, Tag.SUPERSEDED_BY, keep)
            client.set_terminated(run.info.run_id, status="KILLED")
