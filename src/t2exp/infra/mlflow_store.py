"""Reaching an MLflow tracking store before the first MLflow call: a server is checked to answer
(:func:`check_server`, used by the app and every command), and a command that only reads runs
opens the store with :func:`open_for_reading`, which never creates one.

MLflow's REST client retries a failed request 7 times with a doubling backoff (minutes of silence
when the server is gone), and MLflow creates an empty store at a ``sqlite:///`` path or a
directory that does not exist (a mistyped path reads as "no such run").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from t2exp.errors import TrackingError, one_line

# a command retries a few times and then says so in one line; a value the user set wins
HTTP_RETRY_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                       "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
HEALTH_TIMEOUT = 5.0


def check_server(uri: str, key: str = "tracking.uri") -> None:
    """An MLflow server answers at ``uri`` (its ``/health``), checked before any work starts;
    ``key`` is how the user gave the URI (``tracking.uri``, ``--tracking-uri``)."""
    import urllib.error
    import urllib.request

    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT) as resp:
            resp.read(64)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"{key}={uri}: no MLflow server answers ({one_line(reason, 120)}); start it "
            f"(mlflow server --host HOST --port PORT) or set {key} to a local store (sqlite:///PATH/mlflow.db)"
        ) from None


def local_store(uri: str) -> Path | None:
    """The file or directory of a local store: ``sqlite:///PATH``, ``file:PATH`` or a bare path;
    None for a server or a database elsewhere (``http://``, ``postgresql://``, ``sqlite://`` in memory)."""
    if uri.startswith("sqlite:"):
        path = uri[len("sqlite:///"):].split("?", 1)[0] if uri.startswith("sqlite:///") else ""
        return Path(path) if path and path != ":memory:" else None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(uri) if not parsed.scheme or len(parsed.scheme) == 1 else None  # a bare path (C:\\ on Windows)


def open_for_reading(uri: str, key: str = "--tracking-uri") -> Any:
    """An ``MlflowClient`` of the existing store at ``uri``, for a command that reads runs: a
    server must answer (:func:`check_server`), a local store must exist. Raises ``TrackingError``
    naming the URI and the fix; nothing is created."""
    if uri.startswith(("http://", "https://")):
        check_server(uri, key)
    path = local_store(uri)
    if path is not None and not path.exists():
        raise TrackingError(
            f"{key}={uri}: no MLflow store at {path} (nothing was created); give the store your runs were "
            f"logged to (a run's default: mlruns/mlflow.db under the directory it was started from)"
        )
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)
