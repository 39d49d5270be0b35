"""Opening an MLflow tracking store: the first MLflow call a process makes on a store.

MLflow creates and migrates a new SQLite store on first use (the client's constructor does it),
and two processes doing that at once break each other (``table already exists``, ``duplicate
column``). :func:`open_client` is the one place a t2exp process makes that call: for a SQLite
store it happens under a lock next to the file, once per process and store (MLflow keeps the
opened store for the process). A fault opening the file (not SQLite, a schema of another MLflow
version, a disk that fills while the store is created, no permission) is one ``TrackingError``
naming the file and the fix; a new store whose creation failed is removed (it holds no run).
"""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

from t2exp.errors import OS_FAULTS, TrackingError, one_line, os_error_line
from t2exp.infra.cache import build_lock
from t2exp.infra.contained import remove_file
from t2exp.infra.mlflow_store import sqlite_path

_OPENED: set[str] = set()  # the SQLite stores this process has opened (MLflow caches each one)
INIT_LOCK_TIMEOUT = 600  # seconds a process waits for another one creating the same store


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` of ``uri``; a SQLite store is opened (created, migrated) under its lock
    the first time this process opens it. Raises ``TrackingError`` naming the file and the fix."""
    from mlflow.tracking import MlflowClient

    db = sqlite_path(uri)
    if db is None or uri in _OPENED:
        return MlflowClient(tracking_uri=uri)
    new = False  # set under the lock: only a store this process began may be removed
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(db.parent, f"{db.name}.init", timeout=INIT_LOCK_TIMEOUT):
            new = not db.exists() or db.stat().st_size == 0
            client = MlflowClient(tracking_uri=uri)
    except Exception as exc:
        _forget_engine(db)
        if new:
            _remove_half_made(db)
        raise TrackingError(store_fault(uri, db, exc, removed=new and not db.exists())) from None
    _OPENED.add(uri)
    return client


def _forget_engine(db: Path) -> None:
    """MLflow keeps one SQLAlchemy engine per database URI for the process, with its connections
    to the file open: after a failed open they would still see the file as it was (a removed
    half-made store included). Closed, so the next open in this process starts afresh."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        engines = SqlAlchemyStore._engine_map
        for key in [k for k in engines if sqlite_path(k) == db]:
            engines.pop(key).dispose()
    except Exception:  # another MLflow layout: nothing cached to close
        pass


def _remove_half_made(db: Path) -> None:
    """A store whose creation failed holds no run: removed, so the next run creates it whole."""
    for path in (db, *(db.with_name(db.name + s) for s in ("-journal", "-wal", "-shm"))):
        try:
            remove_file(path, db.parent, missing_ok=True)
        except OSError:
            pass


# what a message from SQLite or MLflow says about the file ({db}), and what a user does about it
_FAULTS = (
    (
        ("file is not a database", "file is encrypted"),
        "{db} is not an SQLite database ({what}); move it away, or point tracking.uri at another file (sqlite:///PATH/mlflow.db)",
    ),
    (
        ("out-of-date database schema", "can't locate revision", "no such revision"),
        "{db} holds the schema of another MLflow version ({what}; MLflow {version} here); back it up and run "
        "'mlflow db upgrade {uri}' with MLflow {version} if the store is older, or point tracking.uri at a new file",
    ),
    (("database or disk is full",), "{db}: the disk filled while the store was written ({what}); " + OS_FAULTS[errno.ENOSPC]),
    (
        ("readonly database", "read-only file system"),
        "{db} is read-only here ({what}); point tracking.uri at a writable directory (sqlite:///PATH/mlflow.db)",
    ),
    (
        ("unable to open database file",),
        "{db} cannot be opened ({what}); point tracking.uri at a directory you can write (sqlite:///PATH/mlflow.db)",
    ),
)
_SCHEMA = re.compile(r"found version (\w+), but expected (\w+)")


def store_fault(uri: str, db: Path, exc: BaseException, removed: bool = False) -> str:
    """One line: the store's file, what is wrong with it, and the fix."""
    import mlflow

    raw = one_line(getattr(exc, "orig", None) or exc)  # SQLAlchemy's wrapper quotes the SQL: the driver's words
    schema = _SCHEMA.search(raw)
    what = f"its schema is {schema[1]}, this MLflow expects {schema[2]}" if schema else one_line(raw, 160)
    gone = "; the half-made store was removed" if removed else ""
    for needles, fix in _FAULTS:
        if any(n in raw.lower() for n in needles):
            return f"tracking.uri={uri}: " + fix.format(db=db, what=what, uri=uri, version=mlflow.__version__) + gone
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError):
        if cause.filename is None:
            cause.filename = str(db)
        return f"tracking.uri={uri}: {os_error_line(cause)}{gone}"
    return (
        f"tracking.uri={uri}: the MLflow store {db} could not be opened ({type(exc).__name__}: {what}); "
        f"fix it or point tracking.uri at another file (sqlite:///PATH/mlflow.db){gone}"
    )
