"""MLflow logging: params, metrics, artifacts; parent/child runs for sweeps; secrets redacted."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from t2exp.errors import TrackingError, one_line
from t2exp.infra.mlflow_store import Tag, cell_runs, open_client
from t2exp.infra.mlflow_store import check_server as _check_server  # the one health check of a server
from t2exp.infra.redaction import env_secrets, redact_text, redact_value
from t2exp.infra.sqlite_store import driver_words, known_fault, sqlite_path
from t2exp.tracking.inspection import code_version, dataset_entities, end_traces, process_tags, set_experiment_kind, trace_question

log = logging.getLogger(__name__)

PARENT_ENV = "T2EXP_PARENT_RUN_ID"
LINK_BATCH = 100  # MLflow links at most 100 traces to a run per call (MAX_TRACE_LINKS_PER_REQUEST)
DISPLAY_DECIMALS = 4  # logged metric values are rounded to this many decimals


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = redact_value(key, v)
    return out


def ensure_tracking(uri: str, experiment: str, artifact_location: str | None) -> str:
    """Set the tracking URI, check a server answers, open the store (a new SQLite store is created
    under its lock: ``infra.mlflow_store.open_client``) and create the experiment if needed; returns
    the experiment id. Every MLflow call of a run comes after this one."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    if uri.startswith(("http://", "https://")):
        _check_server(uri)
    return _ensure_experiment(open_client(uri), experiment, artifact_location)


def _ensure_experiment(client: Any, experiment: str, artifact_location: str | None) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        exp_id = str(exp.experiment_id)
    else:
        art = None
        if artifact_location:
            Path(artifact_location).mkdir(parents=True, exist_ok=True)
            art = Path(artifact_location).resolve().as_uri()
        try:
            exp_id = client.create_experiment(experiment, artifact_location=art)
        except Exception:  # created concurrently by another process
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                raise
            exp_id = str(exp.experiment_id)
    set_experiment_kind(client, exp_id)
    return exp_id


_STORE_MODULES = ("mlflow", "requests", "urllib3", "sqlalchemy", "sqlite3")


def _store_call(method: Callable[..., Any]) -> Callable[..., Any]:
    """A Tracker method whose failure in the store (a server gone, a full disk, a locked database)
    becomes one ``TrackingError`` naming the URI and the run; after it the tracker writes nothing
    more (the error paths' tags and the closing status are not attempted against a dead store)."""

    @functools.wraps(method)
    def call(self: Tracker, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            if not (isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _STORE_MODULES):
                raise
            self.broken = True
            db = sqlite_path(self.uri)
            known = known_fault(self.uri, db, exc) if db is not None else None  # a full disk: its cause and the fix
            why = f": {known}" if known else f" ({type(exc).__name__}: {one_line(driver_words(exc), 160)})"
            raise TrackingError(f"tracking.uri={self.uri}: MLflow run {self.run_id} could not be written{why}") from None

    return call


class Tracker:
    """One MLflow run. Child of ``parent`` when given (a shard's cell run), else of
    ``$T2EXP_PARENT_RUN_ID`` when a sweep set it."""

    broken = False  # a store call failed: nothing more is written
    name = ""  # the run's name as created (a re-run's says so)

    def __init__(
        self, uri: str, experiment: str, artifact_location: str | None, run_name: str, tags: dict[str, str], parent: str | None = None
    ) -> None:
        self.uri, self.run_id = uri, "(not created)"
        tags = {k: redact_text(str(redact_value(k, v))) for k, v in tags.items()}
        parent = parent or os.environ.get(PARENT_ENV)
        if parent:
            tags["mlflow.parentRunId"] = parent
        tags["mlflow.runName"] = run_name
        tags = {**code_version(), **process_tags(), **tags}
        self._open(experiment, artifact_location, tags, run_name)
        self.closed = False

    @_store_call
    def _open(self, experiment: str, artifact_location: str | None, tags: dict[str, str], run_name: str) -> None:
        from t2exp.tracking.names import earlier_runs, rerun_name

        self.experiment_id = ensure_tracking(self.uri, experiment, artifact_location)
        self.client = open_client(self.uri)
        key = tags.get(Tag.CELL_KEY) if Tag.RESUMED_FROM not in tags else None  # a cell's run, not a skipped cell's copy
        earlier = earlier_runs(self.client, self.experiment_id, key) if key else 0
        if earlier:
            run_name = rerun_name(run_name, earlier)
            tags = {**tags, "mlflow.runName": run_name, Tag.RERUN: str(earlier)}
        self.run = self.client.create_run(self.experiment_id, tags=tags, run_name=run_name)
        self.run_id, self.name = self.run.info.run_id, run_name

    @classmethod
    def attach(cls, uri: str, run_id: str) -> Tracker:
        """An existing run (a sweep's parent), to log more on it; ``finish`` closes it."""
        tracker = cls.__new__(cls)
        tracker.uri, tracker.client, tracker.run_id, tracker.closed = uri, open_client(uri), run_id, False
        tracker.experiment_id = tracker.client.get_run(run_id).info.experiment_id
        return tracker

    @_store_call
    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        secrets = env_secrets()
        items = [Param(k, redact_text(str(redact_value(k, v)), secrets)[:5000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    @_store_call
    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        # rounded for display (41.6667, not 41.66666666666667); full precision stays in metrics.json
        items = [Metric(k, round(float(v), DISPLAY_DECIMALS), ts, 0) for k, v in metrics.items() if v is not None and v == v]
        for i in range(0, len(items), 500):
            self.client.log_batch(self.run_id, metrics=items[i : i + 500])

    @_store_call
    def set_tags(self, tags: Mapping[str, Any]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, redact_text(str(redact_value(k, v)))[:5000])

    @_store_call
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    @_store_call
    def log_inputs(self, subsets: Any) -> None:
        """MLflow reads which datasets exist, then inserts the missing ones: two cells of a sweep
        logging the same subset at once can both insert it, and the second insert breaks the
        unique (experiment, name, digest) constraint. The dataset exists then; logging again
        links it (the same answer as create_experiment's race in ``ensure_tracking``)."""
        from mlflow.exceptions import MlflowException

        datasets = dataset_entities(subsets)
        try:
            self.client.log_inputs(self.run_id, datasets=datasets)
        except MlflowException as exc:
            if "UNIQUE constraint failed" not in str(exc) and "IntegrityError" not in str(exc):
                raise
            self.client.log_inputs(self.run_id, datasets=datasets)

    @_store_call
    def log_table(self, data: Mapping[str, list[Any]], artifact_file: str) -> None:
        self.client.log_table(self.run_id, data=dict(data), artifact_file=artifact_file)

    @_store_call
    def trace(self, row: Mapping[str, Any], k: int, times: Mapping[str, tuple[int, int]]) -> str:
        return trace_question(self.client, self.experiment_id, self.run_id, row, k, times)

    @_store_call
    def end_traces(self, traced: Any, k: int) -> None:
        end_traces(self.uri, traced, k)

    @_store_call
    def link_traces_of(self, run_id: str) -> int:
        """Link the traces of run ``run_id`` (its own and those linked to it) to this run, so a
        search of this run's traces finds them (MLflow's ``link_traces_to_run``, at most
        ``LINK_BATCH`` ids a call); how many were linked."""
        ids: list[str] = []
        token = None
        while True:
            page = self.client.search_traces(
                locations=[self.experiment_id], run_id=run_id, include_spans=False, max_results=LINK_BATCH, page_token=token
            )
            ids.extend(t.info.trace_id for t in page)
            token = page.token
            if not token:
                break
        for i in range(0, len(ids), LINK_BATCH):
            self.client.link_traces_to_run(ids[i : i + LINK_BATCH], self.run_id)
        return len(ids)

    @_store_call
    def finish(self, status: str = "FINISHED") -> None:
        if not self.closed:
            self.client.set_terminated(self.run_id, status=status)
            self.closed = True


def finished_run_for(uri: str, experiment: str, artifact_location: str | None, key: str):
    """The newest FINISHED run of the cell ``key``, or None."""
    exp_id = ensure_tracking(uri, experiment, artifact_location)
    runs = cell_runs(open_client(uri), exp_id, key, "FINISHED")
    return runs[0] if runs else None


def mirror_into_sweep(uri: str, experiment: str, artifact_location: str | None, done: Any, run_name: str) -> str | None:
    """A cell that ``resume=true`` skipped gets a child under the current sweep's parent that
    mirrors its finished run (params, metrics, tags and artifacts, ``t2exp.resumed_from`` naming
    it; its traces are linked to the mirror), so the parent's report lists every cell of the sweep
    and the trace comparison of two cells finds the skipped cell's traces. None outside a sweep."""
    import tempfile

    parent = os.environ.get(PARENT_ENV)
    if not parent or done.data.tags.get("mlflow.parentRunId") == parent:
        return None
    keep = {k: v for k, v in done.data.tags.items() if not k.startswith("mlflow.") or k in MIRRORED_MLFLOW_TAGS}
    mirror = Tracker(uri, experiment, artifact_location, run_name, {**keep, Tag.RESUMED_FROM: done.info.run_id})
    mirror.log_params(done.data.params)
    mirror.log_metrics(done.data.metrics)
    with tempfile.TemporaryDirectory() as tmp:
        for a in mirror.client.list_artifacts(done.info.run_id):
            local = mirror.client.download_artifacts(done.info.run_id, a.path, tmp)
            mirror.log_artifact(local, os.path.dirname(a.path) or None)
    mirror.link_traces_of(done.info.run_id)
    mirror.finish("FINISHED")
    return str(mirror.run_id)


MIRRORED_MLFLOW_TAGS = (
    "mlflow.note.content",
    "mlflow.source.git.commit",
    "mlflow.source.name",
    "mlflow.source.type",
    "mlflow.loggedArtifacts",
)
