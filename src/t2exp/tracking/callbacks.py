"""Hydra callback: one MLflow parent run per sweep, every job a child run.

``on_multirun_start`` runs in the launching process: it initialises the tracking store there
first (concurrent first-time SQLite schema creation fails), creates the parent run and exports its
id in ``T2EXP_PARENT_RUN_ID`` so jobs (basic, joblib, submitit launchers) attach as children.
``on_job_start`` runs in the job process and sets the variable again from this callback's own
``parent_id`` (launchers pickle the callbacks to their workers): a loky worker reused by a later
sweep in the same interpreter would otherwise still carry the previous sweep's id.
``on_multirun_end`` names each cell by what tells it apart (``base · minilm · k=3``), logs the sweep's
report (``t2exp.report`` of the parent: tables and plots under ``report/``, its headline table as the
parent's description) and closes the parent as FINISHED, or FAILED when a child failed; because Hydra
does not call it when a job raises, an ``atexit`` hook closes a still-running parent as FAILED.
"""

from __future__ import annotations

import atexit
import logging
import os
from pathlib import Path
from typing import Any, cast

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from t2exp.errors import TrackingError, exit_with, one_line
from t2exp.infra.mlflow_store import Tag, child_runs, open_client, run_status
from t2exp.infra.redaction import redact_overrides, redact_text
from t2exp.infra.signals import forwarded_signal, start_sweep_signals
from t2exp.tracking.mlflow_run import PARENT_ENV, ensure_tracking

log = logging.getLogger(__name__)


class MLflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.uri: str | None = None
        self.detached = False  # hydra.launcher.wait=false: the parent outlives this process

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tr = config.tracking
        self.uri = str(tr.uri)
        task = cast(list[str], OmegaConf.to_container(config.hydra.overrides.task, resolve=False)) or []
        overrides = redact_text(" ".join(redact_overrides(task)))  # the same redaction as every child's tags
        try:
            exp_id = ensure_tracking(self.uri, str(tr.experiment), tr.get("artifact_location"))
            run = open_client(self.uri).create_run(
                exp_id,
                run_name=f"sweep {overrides}"[:250],
                tags={Tag.SWEEP: "parent", Tag.SWEEP_DIR: str(config.hydra.sweep.dir), Tag.OVERRIDES: overrides},
            )
        except TrackingError as exc:  # the store cannot be opened: its own line names the file and the fix
            exit_with(redact_text(str(exc)))
        except Exception as exc:
            # Hydra turns a callback's exception into a warning and runs the sweep anyway, without
            # its parent run (orphan children, no report): the sweep ends here, before any cell
            exit_with(
                redact_text(
                    f"tracking.uri={self.uri}: the sweep's parent run could not be created "
                    f"({type(exc).__name__}: {one_line(exc, 200)}); check the tracking store and run the sweep again"
                )
            )
        self.parent_id = run.info.run_id
        os.environ[PARENT_ENV] = self.parent_id
        atexit.register(self._close_if_running)
        start_sweep_signals(local_workers=is_joblib_launcher(config.hydra.launcher))
        log.info("MLflow parent run %s for sweep: %s", self.parent_id, overrides)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is not None:
            os.environ[PARENT_ENV] = self.parent_id

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is None:
            return
        if forwarded_signal():  # the launching process was told to stop and its cells have: no report, the runs KILLED
            self._close_if_running()
        elif submitted_only(config.hydra.launcher):  # the cells run on without this process
            self.detached = True
            log.info(
                "MLflow parent run %s stays RUNNING until `t2exp collect %s` finds every cell ended", self.parent_id, config.hydra.sweep.dir
            )
        else:
            close_sweep(str(self.uri), self.parent_id, Path(str(config.paths.work)))
        os.environ.pop(PARENT_ENV, None)

    def _close_if_running(self) -> None:
        """At exit: a parent still RUNNING (a job raised, a signal ended the sweep) becomes
        KILLED when a signal ended it, else FAILED; after a signal passed on to local cells, so
        does any child those cells left RUNNING."""
        if self.parent_id is None or self.detached:
            return
        try:
            client = open_client(str(self.uri))
            if run_status(client, self.parent_id) != "RUNNING":
                return
            client.set_terminated(self.parent_id, status="KILLED" if forwarded_signal() else "FAILED")
            if forwarded_signal():
                # the local cells were stopped by the passed-on signal, and joblib ends the other
                # workers as soon as the first cell raises: one may be gone before it closed its run
                for child in child_runs(client, self.parent_id, "RUNNING"):
                    client.set_terminated(child.info.run_id, status="KILLED")
        except Exception:  # best effort at interpreter exit
            pass


def close_sweep(uri: str, parent_id: str, work: Path | None = None) -> str:
    """End a sweep whose cells have all ended: each cell named by what tells it apart, the sweep's
    report logged on the parent run, the parent closed FINISHED (FAILED when a cell failed). Run
    by the launching process, or by ``t2exp status``/``t2exp collect`` after a submit-and-return
    sweep; the report's files go under ``work`` (the sweep's ``paths.work``; default the current
    directory). The parent's status, returned."""
    from t2exp.tracking.summary import ui_line

    client = open_client(uri)
    _name_cells(client, parent_id)
    _report(uri, parent_id, work)
    parent = client.get_run(parent_id)
    children = child_runs(client, parent_id)
    status = "FAILED" if any(c.info.status in ("FAILED", "KILLED") for c in children) else "FINISHED"
    client.set_terminated(parent_id, status=status)
    log.info("sweep done: MLflow parent run %s (its report: artifacts report/ of that run)", parent_id)
    log.info("%s (the sweep's parent run first: %s)", ui_line(uri, parent.info.experiment_id), parent.info.run_name)
    return status


def _name_cells(client: Any, parent_id: str) -> None:
    """Each child run named by what tells it apart (:func:`t2exp.tracking.names.name_sweep_cells`);
    a store that fails here leaves the names as they were and the sweep ends normally."""
    from t2exp.tracking.names import name_sweep_cells

    try:
        name_sweep_cells(client, parent_id)
    except Exception as exc:  # best effort: the names are a convenience, the runs are logged
        log.warning("sweep cells not renamed: %s", one_line(exc, 200))


def _report(uri: str, parent_id: str, work: Path | None) -> None:
    """The Table-3/Table-4 report of the finished cells, logged on the parent run and written
    under ``work`` (the sweep's ``paths.work``); a sweep whose report cannot be made (no finished
    cell) still ends normally."""
    from t2exp.errors import T2ExpError
    from t2exp.evaluation.reporting.build import report_parent

    try:
        result = report_parent(uri, parent_id, work)
        log.info("sweep report: %s (%s)", ", ".join(sorted(result.tables)) or "no table", result.out_dir)
    except T2ExpError as exc:
        log.warning("sweep report not made: %s", exc)
        return
    _explorer(uri, parent_id, work)


def _explorer(uri: str, parent_id: str, work: Path | None) -> None:
    """The sweep's explorer page (:func:`t2exp.evaluation.reporting.explore.explore_parent`) beside
    its report; one that cannot be made is one warning, the sweep ends normally."""
    try:
        from t2exp.evaluation.reporting.explore import explore_parent

        log.info("sweep explorer page: %s (artifact report/explore.html of the parent run)", explore_parent(uri, parent_id, work))
    except Exception as exc:  # best effort: the runs and the report are logged
        log.warning("sweep explorer page not made: %s", one_line(exc, 200))


def is_joblib_launcher(launcher: Any) -> bool:
    """``hydra.launcher`` is joblib's (``hydra/launcher=local_parallel``: cells in loky workers)."""
    return "joblib" in str(launcher.get("_target_", ""))


def submitted_only(launcher: Any) -> bool:
    """``hydra.launcher`` submits and returns (``hydra/launcher=slurm hydra.launcher.wait=false``:
    :mod:`t2exp.pipeline.submit`): the sweep's cells run on after this process has ended."""
    return "wait" in launcher and not bool(launcher.get("wait"))
