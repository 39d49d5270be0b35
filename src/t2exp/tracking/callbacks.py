"""Hydra callback: one MLflow parent run per sweep, every job a child run.

``on_multirun_start`` runs in the launching process: it initialises the tracking store there
first (concurrent first-time SQLite schema creation fails), creates the parent run and exports its
id in ``T2EXP_PARENT_RUN_ID`` so jobs (basic, joblib, submitit launchers) attach as children.
``on_job_start`` runs in the job process and sets the variable again from this callback's own
``parent_id`` (launchers pickle the callbacks to their workers): a loky worker reused by a later
sweep in the same interpreter would otherwise still carry the previous sweep's id.
``on_multirun_end`` logs the sweep's report (``t2exp.report`` of the parent: tables and plots under
``report/``) and closes the parent as FINISHED, or FAILED when a child failed; because Hydra
does not call it when a job raises, an ``atexit`` hook closes a still-running parent as FAILED.
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import Any, cast

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from t2exp.errors import exit_with
from t2exp.infra.redaction import redact_overrides, redact_text
from t2exp.infra.remote import one_line
from t2exp.tracking.mlflow_run import PARENT_ENV, ensure_tracking

log = logging.getLogger(__name__)


class MLflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.uri: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from mlflow.tracking import MlflowClient

        tr = config.tracking
        self.uri = str(tr.uri)
        task = cast(list[str], OmegaConf.to_container(config.hydra.overrides.task, resolve=False)) or []
        overrides = redact_text(" ".join(redact_overrides(task)))  # the same redaction as every child's tags
        try:
            exp_id = ensure_tracking(self.uri, str(tr.experiment), tr.get("artifact_location"))
            run = MlflowClient(tracking_uri=self.uri).create_run(
                exp_id,
                run_name=f"sweep {overrides}"[:250],
                tags={"t2exp.sweep": "parent", "t2exp.sweep_dir": str(config.hydra.sweep.dir), "t2exp.overrides": overrides},
            )
        except Exception as exc:
            # Hydra turns a callback's exception into a warning and runs the sweep anyway, without
            # its parent run (orphan children, no report): the sweep ends here, before any cell
            exit_with(redact_text(f"tracking.uri={self.uri}: the sweep's parent run could not be created "
                                  f"({type(exc).__name__}: {one_line(exc)}); check the tracking store and run the sweep again"))
        self.parent_id = run.info.run_id
        os.environ[PARENT_ENV] = self.parent_id
        atexit.register(self._close_if_running)
        log.info("MLflow parent run %s for sweep: %s", self.parent_id, overrides)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is not None:
            os.environ[PARENT_ENV] = self.parent_id

    def _children_status(self) -> str:
        from mlflow.tracking import MlflowClient

        assert self.parent_id is not None, "called by on_multirun_end once the parent run exists"
        client = MlflowClient(tracking_uri=self.uri)
        parent = client.get_run(self.parent_id)
        children = client.search_runs([parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'")
        if any(c.info.status in ("FAILED", "KILLED") for c in children):
            return "FAILED"
        return "FINISHED"

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is None:
            return
        from mlflow.tracking import MlflowClient

        self._report()
        MlflowClient(tracking_uri=self.uri).set_terminated(self.parent_id, status=self._children_status())
        log.info("sweep done: MLflow parent run %s (its report: artifacts report/ of that run)", self.parent_id)
        os.environ.pop(PARENT_ENV, None)

    def _report(self) -> None:
        """The Table-3/Table-4 report of the finished cells, logged on the parent run; a sweep
        whose report cannot be made (no finished cell) still ends normally."""
        from t2exp.errors import T2ExpError
        from t2exp.evaluation.report.cli import report_parent

        assert self.parent_id is not None and self.uri is not None, "on_multirun_start created the parent"
        try:
            result = report_parent(self.uri, self.parent_id)
            log.info("sweep report: %s (%s)", ", ".join(sorted(result.tables)) or "no table", result.out_dir)
        except T2ExpError as exc:
            log.warning("sweep report not made: %s", exc)

    def _close_if_running(self) -> None:
        if self.parent_id is None:
            return
        try:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=self.uri)
            if client.get_run(self.parent_id).info.status == "RUNNING":
                client.set_terminated(self.parent_id, status="FAILED")
        except Exception:  # best effort at interpreter exit
            pass
