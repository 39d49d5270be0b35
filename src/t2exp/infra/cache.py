"""Content-addressed disk caches shared by every run and sweep cell.

- ``KVCache``: a SQLite table of key → bytes (embeddings, LLM calls). Writes commit per batch,
  so a killed job keeps everything computed so far; several processes may share one file.
- ``JsonlLog``: append-only JSONL with fsync per record and a reader that tolerates a torn last line.
- ``build_lock``: a file lock so that two processes needing the same index build it once;
  ``cell_lock``: one process at a time runs a sweep cell (the second resumes from the first).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from t2exp.errors import OS_FAULTS, T2ExpError, naming
from t2exp.infra.contained import remove_file
from t2exp.infra.jsonl import read_jsonl_objects


class CorruptCacheError(T2ExpError):
    """A cache file is damaged beyond the torn last line a killed writer can leave."""


def _fsync_dir(path: Path) -> None:
    """Make a new or renamed directory entry durable (POSIX; a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def content_key(*parts: object) -> str:
    """sha256 over the JSON form of ``parts`` (stable across processes and runs)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str, ensure_ascii=False).encode())
        h.update(b"\x1e")
    return h.hexdigest()


# SQLite faults that are not damage: the cache is intact and is kept
_SQLITE_FAULTS = {
    "SQLITE_FULL": OS_FAULTS[errno.ENOSPC],
    "SQLITE_READONLY": "the cache is read-only here: point paths.cache at a writable directory",
    "SQLITE_CANTOPEN": "it cannot be opened: point paths.cache at a writable directory",
    "SQLITE_IOERR": "the disk failed a read or write: check it and run the same command again (the cache is kept)",
    "SQLITE_BUSY": "another process keeps it locked: run the same command again once that one is done (the cache is kept)",
}
# Two processes creating one cache at once can meet in SQLite's lock upgrade, where one is told
# "database is locked" at once rather than waiting (its busy timeout does not apply): it tries again.
_OPEN_TRIES = 5


class KVCache:
    def __init__(self, path: str | Path, table: str = "kv") -> None:
        self.path = Path(path)
        self.table = table
        self._local = threading.local()
        self._opening = threading.Lock()
        self._ready = False

    def open(self) -> None:
        """Create the file and its table if missing and check it (a damaged page is found when a
        run starts, not halfway through it); the first read or write opens it as well."""
        with self._opening:
            if self._ready:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._guard():
                for attempt in range(1, _OPEN_TRIES + 1):
                    try:
                        self._create_and_check()
                        break
                    except sqlite3.OperationalError as exc:
                        if not str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_BUSY") or attempt == _OPEN_TRIES:
                            raise
                        self.close()
                        time.sleep(0.05 * attempt)  # the other process finishes its creation meanwhile
            self._ready = True

    def _create_and_check(self) -> None:
        conn = self._connect()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        conn.commit()
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"integrity check: {problems[0]}")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite errors of a damaged file as one line naming it and the fix."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            code = "_".join(str(getattr(exc, "sqlite_errorname", "")).split("_")[:2])  # SQLITE_IOERR_WRITE
            read_only = code == "SQLITE_CANTOPEN" and not os.access(self.path.parent, os.W_OK)  # a read-only mount
            fault = _SQLITE_FAULTS.get("SQLITE_READONLY" if read_only else code)
            if fault is not None:  # the file is fine: the disk or its permissions are not
                raise T2ExpError(f"{self.path}: {exc}; {fault}") from None
            raise CorruptCacheError(
                f"{self.path}: not a usable SQLite cache ({exc}); delete it (and its -wal/-shm files): it is a cache, "
                "everything in it is recomputed"
            ) from None

    def close(self) -> None:
        """Close this thread's connection (a later call opens another)."""
        conn, self._local.conn = getattr(self._local, "conn", None), None
        if conn is not None:
            conn.close()

    def _conn(self) -> sqlite3.Connection:
        if not self._ready:
            self.open()
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, bytes] = {}
        conn = self._conn()
        with self._guard():
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                q = f"SELECT key, value FROM {self.table} WHERE key IN ({','.join('?' * len(chunk))})"
                out.update({k: bytes(v) for k, v in conn.execute(q, chunk)})
        return out

    def get(self, key: str) -> bytes | None:
        return self.get_many([key]).get(key)

    def put_many(self, items: Mapping[str, bytes]) -> None:
        if not items:
            return
        conn = self._conn()
        with self._guard(), conn:
            conn.executemany(f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", list(items.items()))

    def put(self, key: str, value: bytes) -> None:
        self.put_many({key: value})

    def __len__(self) -> int:
        with self._guard():
            return int(self._conn().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def absorb(self, other: KVCache) -> int:
        """Copy in every entry of ``other`` (same table) this cache lacks; keys are content keys,
        so an entry means the same in both. Returns how many were added."""
        rows = other._conn().execute(f"SELECT key, value FROM {other.table}").fetchall()
        before = len(self)
        conn = self._conn()
        with self._guard(), conn:
            conn.executemany(f"INSERT OR IGNORE INTO {self.table} (key, value) VALUES (?, ?)", rows)
        return len(self) - before


class JsonlLog:
    """Append-only JSONL: one ``write`` = one line, flushed and fsynced."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()

    def _repair(self) -> None:
        """Drop a torn (unterminated) last line left by a killed writer."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            data = self.path.read_bytes()
            cut = data.rfind(b"\n") + 1
            f.truncate(cut)

    def read(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.path))

    def write(self, record: Mapping[str, Any]) -> None:
        line = jsonl_line(record)
        new = not self.path.exists()
        with naming(self.path), open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        if new:
            _fsync_dir(self.path.parent)


def jsonl_line(record: Mapping[str, Any]) -> str:
    """One record as :class:`JsonlLog` writes it (a record read back from its line gives the same line)."""
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield records; a torn or corrupt last line is skipped, a corrupt middle line is an error
    (:func:`t2exp.infra.jsonl.read_jsonl_objects`)."""
    path = Path(path)
    if not path.exists():
        return
    yield from read_jsonl_objects(
        path,
        torn_tail=True,
        error=CorruptCacheError,
        advice=("a damaged file: delete that line, or the file to recompute it (LLM answers and embeddings stay cached)"),
    )


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with naming(path), os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        if isinstance(exc, OSError) and os.path.basename(str(exc.filename)).startswith(f".{path.name}."):
            exc.filename, exc.filename2 = str(path), None  # the file asked for, not the temporary one beside it
        if tmp:
            remove_file(tmp, path.parent, missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def locks_dir(cache: str | Path) -> Path:
    """Where the locks of the cache ``cache`` (``paths.cache``) live."""
    return Path(str(cache)) / "locks"


def lock_name(kind: str, key: str, *detail: str | int) -> str:
    """A lock's name, ``<kind>-<key>`` and its details dash-joined: ``cell-<key>``,
    ``cell-<key>-shard-0-of-3``, ``cell-<key>-run``, ``model-<tag>``, ``mlflow.db-init``."""
    return "-".join(map(str, (kind, key, *detail)))


@contextmanager
def build_lock(lock_dir: str | Path, key: str, timeout: float = 3600.0, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an inter-process lock for building the artefact ``key``; when another process holds
    it, ``on_wait`` is called once before waiting (at most ``timeout`` seconds; < 0: no limit).
    The OS drops the lock of a killed holder."""
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_dir / f"{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if on_wait is not None:
            on_wait()
        lock.acquire(timeout=timeout)
    try:
        yield
    finally:
        lock.release()


def cell_lock(lock_dir: str | Path, key: str, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
    """The lock of one sweep cell for a whole run: a second process running the same cell waits
    (``on_wait`` is called once), with no time limit, then resumes from the first one's predictions."""
    return build_lock(lock_dir, key, timeout=-1, on_wait=on_wait)
