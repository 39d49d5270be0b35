"""MLflow in one room: the one client t2exp opens (:func:`open_client`), the names of the
``t2exp.*`` tags it sets (:class:`Tag`), and reading a run back (:func:`run_artifact`,
:func:`run_status`). A server is checked to answer (:func:`check_server`) before any work starts.

MLflow's REST client retries a failed request 7 times with a doubling backoff (minutes of silence
when the server is gone), and MLflow creates an empty store at a ``sqlite:///`` path or a
directory that does not exist (a mistyped path reads as "no such run").
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from t2exp.errors import TrackingError, one_line
from t2exp.infra.redaction import register_secret
from t2exp.infra.sqlite_store import first_open, refuse_earlier_schema, sqlite_path

# a command retries a few times and then says so in one line; a value the user set wins
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
HEALTH_TIMEOUT = 5.0


def check_server(uri: str, key: str = "tracking.uri") -> None:
    """An MLflow server answers at ``uri`` (its ``/health``), checked before any work starts, with
    the credentials MLflow itself sends (:func:`_health_request`); ``key`` is how the user gave the
    URI (``tracking.uri``, ``--tracking-uri``)."""
    import urllib.error
    import urllib.request

    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        with urllib.request.urlopen(_health_request(uri), timeout=HEALTH_TIMEOUT) as resp:
            resp.read(64)
    except urllib.error.HTTPError as exc:
        if exc.code not in (401, 403):
            raise _no_server(uri, key, exc) from None
        raise TrackingError(
            f"{key}={uri}: the server refused the credentials (HTTP {exc.code}); give them in the URL "
            f"(http://USER:PASSWORD@HOST:PORT) or in MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _no_server(uri, key, exc) from None


def _no_server(uri: str, key: str, exc: BaseException) -> TrackingError:
    reason = getattr(exc, "reason", exc)
    return TrackingError(
        f"{key}={uri}: no MLflow server answers ({one_line(reason, 120)}); start it "
        f"(mlflow server --host HOST --port PORT) or set {key} to a local store (sqlite:///PATH/mlflow.db)"
    )


def _health_request(uri: str) -> Any:
    """GET ``/health`` of ``uri`` authenticated as MLflow's REST client is: the URL's own
    ``user:password@`` (requests, MLflow's HTTP library, sends it as basic auth, over any other),
    else MLflow's credentials (MLFLOW_TRACKING_USERNAME/PASSWORD or ~/.mlflow/credentials), else a
    bearer MLFLOW_TRACKING_TOKEN. The userinfo never goes into the request's URL, where urllib
    reads it as part of the host."""
    import base64
    import urllib.parse
    import urllib.request

    from mlflow.utils.credentials import read_mlflow_creds

    parts = urllib.parse.urlsplit(uri.rstrip("/") + "/health")
    host = parts.netloc.rpartition("@")[2]
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=host)))
    creds = read_mlflow_creds()
    user, password = creds.username, creds.password
    if parts.username or parts.password:
        user, password = urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")
    if user and password is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        request.add_header("Authorization", f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}")
    return request


def move_login(uri: str, environ: MutableMapping[str, str] | None = None) -> str:
    """``uri`` of a tracking server without its ``user:password@``: they go to
    MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD of ``environ`` (default this process's, which
    child processes inherit), from where MLflow's client sends them as basic auth, so MLflow never
    holds them in the URL it prints (``View run ... at: URL``) and Hydra's files never see them.
    The password is a secret of this process (``register_secret``). Any other URI comes back as it is."""
    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("http", "https") or parts.password is None:
        return uri
    environ = os.environ if environ is None else environ
    environ["MLFLOW_TRACKING_USERNAME"] = unquote(parts.username or "")
    environ["MLFLOW_TRACKING_PASSWORD"] = unquote(parts.password)
    register_secret(environ["MLFLOW_TRACKING_PASSWORD"])
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def local_store(uri: str) -> Path | None:
    """The file or directory of a local store: ``sqlite:///PATH``, ``file:PATH`` or a bare path;
    None for a server or a database elsewhere (``http://``, ``postgresql://``, ``sqlite://`` in memory)."""
    if uri.startswith("sqlite:"):
        return sqlite_path(uri)
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(uri) if not parsed.scheme or len(parsed.scheme) == 1 else None  # a bare path (C:\\ on Windows)


class Tag:
    """The ``t2exp.*`` tags of a run (and of a question's trace): their names live here only."""

    CELL_KEY = "t2exp.cell_key"  # what resume=true finds a FINISHED cell by
    OVERRIDES = "t2exp.overrides"  # the cell's overrides, redacted
    ERROR = "t2exp.error"  # why the run failed
    SHARDS, SHARD, SHARD_OF = "t2exp.shards", "t2exp.shard", "t2exp.shard_of"  # a sharded cell's run; a shard's (i/N, the cell key)
    SUPERSEDED_BY = "t2exp.superseded_by"  # a stale cell run, KILLED: the run that completed the cell
    RESUMED_FROM = "t2exp.resumed_from"  # a skipped cell's mirror in a sweep: the finished run
    RERUN = "t2exp.rerun"  # a cell run again: how many runs of it the experiment held before
    SWEEP, SWEEP_DIR = "t2exp.sweep", "t2exp.sweep_dir"  # a sweep's parent run ("parent") and its directory
    REPORT = "t2exp.report"  # the run of a report
    KIND, PREDICTIONS = "t2exp.kind", "t2exp.predictions"  # t2exp score --mlflow: "score" and the file scored
    TUNED_ON, REPORTED_ON, SWEEP_KIND = "t2exp.tuned_on", "t2exp.reported_on", "t2exp.sweep_kind"
    VERSION, GIT_DIRTY, HOST, PID = "t2exp.version", "t2exp.git_dirty", "t2exp.host", "t2exp.pid"
    QUESTION_ID, SUBSET = "t2exp.question_id", "t2exp.subset"  # a question's trace


def open_client(uri: str, key: str = "tracking.uri", *, create: bool = True) -> Any:
    """The ``MlflowClient`` of ``uri``, the only one t2exp makes. ``create``: a new SQLite store is
    created (:func:`first_open`); else (a command that reads runs) a server must answer, a local
    store must exist and nothing is created. Raises ``TrackingError`` naming ``key``, the URI and the fix."""
    from mlflow.tracking import MlflowClient

    if not create and uri.startswith(("http://", "https://")):
        check_server(uri, key)
    path = None if create else local_store(uri)
    if path is not None and not path.exists():
        raise TrackingError(
            f"{key}={uri}: no MLflow store at {path} (nothing was created); give the store your runs were "
            f"logged to (a run's default: mlruns/mlflow.db under the directory it was started from)"
        )
    refuse_earlier_schema(uri, key)
    with first_open(uri) if create else nullcontext():
        return MlflowClient(tracking_uri=uri)


@contextmanager
def run_artifact(client: Any, run_id: str, path: str) -> Iterator[Path]:
    """The artifact ``path`` of run ``run_id``, downloaded to a temporary directory for the block."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run_id, path, tmp)
        except Exception as exc:  # MLflow raises several types for a missing run/artifact
            raise TrackingError(f"run {run_id}: cannot download {path} ({type(exc).__name__}: {one_line(exc, 200)})") from None
        yield Path(local)


PAGE = 1000  # runs per search request (MLflow's default page)


def search_all(client: Any, experiment_id: str, filter_string: str = "") -> list[Any]:
    """Every run of ``experiment_id`` that ``filter_string`` selects, oldest first (all pages of MLflow's search)."""
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=PAGE, page_token=token, order_by=["attributes.start_time ASC"]
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def child_runs(client: Any, parent_id: str, status: str | None = None) -> list[Any]:
    """Every child run of ``parent_id`` (only those of ``status`` when given), oldest first."""
    where = f"tags.mlflow.parentRunId = '{parent_id}'" + (f" and attributes.status = '{status}'" if status else "")
    return search_all(client, client.get_run(parent_id).info.experiment_id, where)


def cell_runs(client: Any, experiment_id: str, key: str, status: str | None = None, shards: int | None = None) -> list[Any]:
    """The runs of the cell ``key`` (a sharded cell's of ``shards`` shards, when given; in ``status``, when given), newest first."""
    where = f"tags.`{Tag.CELL_KEY}` = '{key}'" + (f" and attributes.status = '{status}'" if status else "")
    where += f" and tags.`{Tag.SHARDS}` = '{shards}'" if shards else ""
    return search_all(client, experiment_id, where)[::-1]


def run_status(client: Any, run_id: str) -> str | None:
    """The status of run ``run_id`` (``RUNNING``, ``FINISHED``, ...); None when the store has no such run."""
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_run(run_id).info.status)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        return None
