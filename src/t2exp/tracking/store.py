"""Opening an MLflow tracking store: the first MLflow call a process makes on a store.

MLflow creates and migrates a new SQLite store on first use (the client's constructor does it),
and two processes doing that at once break each other (``table already exists``, ``duplicate
column``). :func:`open_client` is the one place a t2exp process makes that call: for a SQLite
store it happens under a lock next to the file, once per process and store (MLflow keeps the
opened store for the process). A fault opening the file (not SQLite, a schema of another MLflow
version, a disk that fills while the store is created, no permission) is one ``TrackingError``
naming the file and the fix; a new store whose creation failed is removed (it holds no run).

A new store is created and migrated under a temporary name beside the file and renamed into place
once whole (:func:`_create`): a signal or a kill in the middle of MLflow's migrations leaves no
half-migrated store under the name every later run opens. One made half-way by MLflow itself (or an
earlier t2exp) is one line saying so, and that it can be deleted when it holds no run.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

from t2exp.errors import OS_FAULTS, TrackingError, one_line, os_error_line
from t2exp.infra.cache import build_lock, lock_name
from t2exp.infra.contained import remove_file
from t2exp.infra.mlflow_store import SQLITE_PREFIX, sqlite_path

_OPENED: set[str] = set()  # the SQLite stores this process has opened (MLflow caches each one)
INIT_LOCK_TIMEOUT = 600  # seconds a process waits for another one creating the same store


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` of ``uri``; a SQLite store is opened (created, migrated) under its lock
    the first time this process opens it. Raises ``TrackingError`` naming the file and the fix."""
    from mlflow.tracking import MlflowClient

    db = sqlite_path(uri)
    if db is None or uri in _OPENED:
        return MlflowClient(tracking_uri=uri)
    _forget_engine(db)  # one kept from an open cut off earlier in this process holds a broken transaction
    new = False  # set under the lock: only a store this process began may be removed
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(db.parent, lock_name(db.name, "init"), timeout=INIT_LOCK_TIMEOUT):
            new = not db.exists() or db.stat().st_size == 0
            if new:
                _create(db)
            client = MlflowClient(tracking_uri=uri)
    except Exception as exc:
        _forget_engine(db)
        if new:
            _remove_half_made(db)
        stop = _stop_behind(exc)
        if stop is not None:
            raise stop from None
        half = None if new else half_migrated(db)
        line = f"tracking.uri={uri}: {db} {half}" if half else store_fault(uri, db, exc, removed=new and not db.exists())
        raise TrackingError(line) from None
    _OPENED.add(uri)
    return client


def _stop_behind(exc: BaseException) -> BaseException | None:
    """The Ctrl-C or SIGTERM (``Interrupted``) that stopped MLflow's migrations, when the library's
    clean-up after it raised another error (alembic's: a rolled-back transaction); else None."""
    seen: BaseException | None = exc
    while seen is not None and isinstance(seen, Exception):
        seen = seen.__cause__ or seen.__context__
    return seen


_CREATING = ".creating-"  # a new store's name while MLflow migrates it: mlflow.db.creating-<pid>


def _create(db: Path) -> None:
    """Create the new store ``db``: MLflow's tables made and migrated to this MLflow's schema under a
    temporary name beside it, renamed to ``db`` once whole. Whatever stops it (an error, Ctrl-C,
    SIGTERM) removes the temporary file; one left by a killed process is removed by the next
    creation (the caller holds the store's lock: no other process is creating it)."""
    import glob

    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry

    for stale in db.parent.glob(glob.escape(db.name + _CREATING) + "*"):
        _remove_half_made(stale)
    tmp = db.with_name(f"{db.name}{_CREATING}{os.getpid()}")
    try:
        engine = create_sqlalchemy_engine_with_retry(f"{SQLITE_PREFIX}{tmp}")
        try:
            _initialize_tables(engine)
        finally:
            engine.dispose()
        os.replace(tmp, db)
    finally:
        _remove_half_made(tmp)


def half_migrated(db: Path) -> str | None:
    """What tells that ``db`` is a store whose creation was cut off (MLflow's migrations stopped
    part-way: a table one of them rebuilds left behind, or its schema at an earlier revision of
    this MLflow) and that it holds no run, with what to do; None otherwise (read only)."""
    import sqlite3
    from contextlib import closing

    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
            found = conn.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
    except sqlite3.Error:  # not SQLite, or unreadable: not this case
        return None
    if "experiments" not in tables:  # not begun by MLflow (another program's database): not this case
        return None
    script = ScriptDirectory.from_config(_get_alembic_config(db_url=""))
    revision = found[0] if found else None
    left = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    earlier = revision is None or (revision != script.get_current_head() and revision in {s.revision for s in script.walk_revisions()})
    if runs or not (left or earlier):
        return None
    where = f"stops at revision {revision}" if revision else "has no revision"
    return (
        f"is a half-migrated MLflow store (its creation was cut off: the schema {where}"
        + (f", {left[0]} left behind" if left else "")
        + f") and holds no run: delete {db} and run again (a new store is created)"
    )


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


def driver_words(exc: BaseException) -> str:
    """What the database driver said, as one line: SQLAlchemy's and MLflow's wrappers of its error
    (``orig``, somewhere down the chain of causes) quote the SQL first and cut it off."""
    seen: BaseException | None = exc
    while seen is not None:
        orig = getattr(seen, "orig", None)
        if orig is not None:
            return one_line(orig)
        seen = seen.__cause__ or seen.__context__
    return one_line(exc)


def known_fault(uri: str, db: Path, exc: BaseException) -> str | None:
    """A fault of the store's file that SQLite or MLflow names (not SQLite, another MLflow's schema,
    a full disk, read-only, unopenable): what it is and the fix, as words of one line; else None."""
    import mlflow

    raw = driver_words(exc)
    schema = _SCHEMA.search(raw)
    what = f"its schema is {schema[1]}, this MLflow expects {schema[2]}" if schema else one_line(raw, 160)
    for needles, fix in _FAULTS:
        if any(n in raw.lower() for n in needles):
            return fix.format(db=db, what=what, uri=uri, version=mlflow.__version__)
    return None


def store_fault(uri: str, db: Path, exc: BaseException, removed: bool = False) -> str:
    """One line: the store's file, what is wrong with it, and the fix."""
    gone = "; the half-made store was removed" if removed else ""
    known = known_fault(uri, db, exc)
    if known:
        return f"tracking.uri={uri}: {known}{gone}"
    what = one_line(driver_words(exc), 160)
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
