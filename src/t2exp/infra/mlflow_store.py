"""Reaching an MLflow tracking store before the first MLflow call: a server is checked to answer
(:func:`check_server`, used by the app and every command), and a command that only reads runs
opens the store with :func:`open_for_reading`, which never creates one.

MLflow's REST client retries a failed request 7 times with a doubling backoff (minutes of silence
when the server is gone), and MLflow creates an empty store at a ``sqlite:///`` path or a
directory that does not exist (a mistyped path reads as "no such run").
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from t2exp.errors import TrackingError, one_line
from t2exp.infra.redaction import register_secret

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


SQLITE_PREFIX = "sqlite:///"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI, else None (also in memory)."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    path = uri[len(SQLITE_PREFIX) :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def local_store(uri: str) -> Path | None:
    """The file or directory of a local store: ``sqlite:///PATH``, ``file:PATH`` or a bare path;
    None for a server or a database elsewhere (``http://``, ``postgresql://``, ``sqlite://`` in memory)."""
    if uri.startswith("sqlite:"):
        return sqlite_path(uri)
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
