"""A SQLite tracking store's first open in a process (:func:`first_open`, used by
:func:`t2exp.infra.mlflow_store.open_client`): MLflow's create-and-migrate runs under a lock beside the
file, once per process and store, in a temporary file renamed into place when whole (:func:`_create`),
so a kill never leaves a half-migrated store. A fault opening it is one ``TrackingError`` naming the
file and the fix; a new store whose creation failed is removed.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from t2exp.errors import OS_FAULTS, TrackingError, causes, one_line, os_error_line
from t2exp.infra.cache import build_lock, lock_name
from t2exp.infra.contained import remove_file

SQLITE_PREFIX = "sqlite:///"
_OPENED: set[str] = set()  # the SQLite stores this process has opened (MLflow caches each one)
_CHECKED: set[str] = set()  # the SQLite stores whose schema this process has read (refuse_earlier_schema)
INIT_LOCK_TIMEOUT = 600  # seconds a process waits for another one creating the same store


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI, else None (also in memory)."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    path = uri[len(SQLITE_PREFIX) :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextmanager
def first_open(uri: str) -> Iterator[None]:
    """The block that opens the store ``uri``: a SQLite store opened first in this process is
    opened under its lock, a new one created whole before it. Raises ``TrackingError`` naming the
    file and the fix."""
    db = sqlite_path(uri)
    if db is None or uri in _OPENED:
        yield
        return
    _forget_engine(db)  # one kept from an open cut off earlier in this process holds a broken transaction
    new = False  # set under the lock: only a store this process began may be removed
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(db.parent, lock_name(db.name, "init"), timeout=INIT_LOCK_TIMEOUT):
            new = not db.exists() or db.stat().st_size == 0
            if new:
                _create(db)
            yield
    except Exception as exc:
        _forget_engine(db)
        if new:
            _remove_half_made(db)
        stop = next((e for e in causes(exc) if not isinstance(e, Exception)), None)  # Ctrl-C or SIGTERM behind a clean-up's error
        if stop is not None:
            raise stop from None
        half = None if new else half_migrated(db)
        line = f"tracking.uri={uri}: {db} {half}" if half else store_fault(uri, db, exc, removed=new and not db.exists())
        raise TrackingError(line) from None
    _OPENED.add(uri)


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


def _schema(db: Path) -> tuple[set[str], int, str | None] | None:
    """The tables of the store ``db``, how many experiments it holds and its schema revision, read
    only; None for a file that is not SQLite or cannot be read."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            experiments = conn.execute("SELECT count(*) FROM experiments").fetchone()[0] if "experiments" in tables else 0
            found = conn.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
    except sqlite3.Error:  # not SQLite, or unreadable
        return None
    return tables, experiments, found[0] if found else None


def _earlier(revision: str | None) -> bool:
    """``revision`` is a schema revision this MLflow upgrades from (not its newest, nor one it does not know)."""
    head, known = _revisions()
    return revision is None or (revision != head and revision in known)


@functools.cache
def _revisions() -> tuple[str, frozenset[str]]:
    """This MLflow's newest schema revision and all it knows (its migration scripts, read once)."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    script = ScriptDirectory.from_config(_get_alembic_config(db_url=""))
    return str(script.get_current_head()), frozenset(s.revision for s in script.walk_revisions())


def half_migrated(db: Path) -> str | None:
    """What tells that ``db`` is a store whose creation was cut off (MLflow's migrations stopped
    part-way, before it wrote its Default experiment: a table one of them rebuilds left behind, or
    its schema at an earlier revision of this MLflow), with what to do; None otherwise (read only)."""
    schema = _schema(db)
    if schema is None or "experiments" not in schema[0]:  # not begun by MLflow (another program's database): not this case
        return None
    tables, experiments, revision = schema
    left = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    if experiments or not (left or _earlier(revision)):
        return None
    where = f"stops at revision {revision}" if revision else "has no revision"
    return (
        f"is a half-migrated MLflow store (its creation was cut off: the schema {where}"
        + (f", {left[0]} left behind" if left else "")
        + f") and holds no run: delete {db} and run again (a new store is created)"
    )


def refuse_earlier_schema(uri: str, key: str = "tracking.uri") -> None:
    """A SQLite store an earlier MLflow made is never opened: this MLflow would upgrade its schema
    (MLflow creates the tables it misses), one way, for every client of the store. Raises
    ``TrackingError`` naming the store and the command that upgrades it. Read once per process and store."""
    db = sqlite_path(uri)
    if db is None or uri in _CHECKED or not db.is_file():
        return
    schema = _schema(db)
    if schema is not None and schema[1] and _earlier(schema[2]):
        from mlflow import __version__ as here

        raise TrackingError(
            f"{key}={uri}: {db} holds the schema of an earlier MLflow (revision {schema[2] or 'none recorded'}); MLflow {here} "
            f"here does not upgrade it, as the upgrade is one-way for every client of the store (each then needs MLflow "
            f">= {here}): back it up and run 'mlflow db upgrade {uri}', or point {key} at a new file"
        )
    _CHECKED.add(uri)


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
    origs = [o for e in causes(exc) if (o := getattr(e, "orig", None)) is not None]
    return one_line(origs[0] if origs else exc)


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
    cause = next((e for e in causes(exc) if isinstance(e, OSError)), None)
    if cause is not None:
        if cause.filename is None:
            cause.filename = str(db)
        return f"tracking.uri={uri}: {os_error_line(cause)}{gone}"
    return (
        f"tracking.uri={uri}: the MLflow store {db} could not be opened ({type(exc).__name__}: {what}); "
        f"fix it or point tracking.uri at another file (sqlite:///PATH/mlflow.db){gone}"
    )
