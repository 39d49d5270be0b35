"""Crash safety of the on-disk caches: append-only prediction logs with a tolerant reader,
atomic file replacement, SQLite key-value caches shared by processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from t2exp.errors import T2ExpError
from t2exp.infra import cache as cache_mod
from t2exp.infra.cache import CorruptCacheError, JsonlLog, KVCache, atomic_write_text, read_jsonl


def test_torn_last_line_is_dropped_and_appending_continues(tmp_path):
    p = tmp_path / "predictions.jsonl"
    p.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "gener')
    assert [r["id"] for r in read_jsonl(p)] == ["a", "b"]  # the reader tolerates it
    log = JsonlLog(p)  # opening repairs it
    assert p.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    log.write({"id": "c"})
    assert [r["id"] for r in log.read()] == ["a", "b", "c"]


def test_unterminated_but_valid_last_line_is_redone(tmp_path):
    p = tmp_path / "predictions.jsonl"
    p.write_text('{"id": "a"}\n{"id": "b"}')  # no newline: the write may not be complete
    assert [r["id"] for r in JsonlLog(p).read()] == ["a"]


def test_damaged_middle_line_is_a_one_line_error(tmp_path):
    p = tmp_path / "predictions.jsonl"
    p.write_text('{"id": "a"}\n{"id": \x00\x00\n{"id": "c"}\n')
    with pytest.raises(CorruptCacheError) as e:
        JsonlLog(p).read()
    assert isinstance(e.value, T2ExpError)
    msg = str(e.value)
    assert str(p) in msg and "line 2" in msg and "\n" not in msg


def test_a_line_that_is_not_utf8_is_a_one_line_error_naming_it(tmp_path):
    p = tmp_path / "predictions.jsonl"
    p.write_bytes(b'{"id": "a"}\n{"id": "b", "generation": "caf\xe9"}\n{"id": "c"}\n')
    with pytest.raises(CorruptCacheError) as e:
        JsonlLog(p).read()
    msg = str(e.value)
    assert f"{p}: line 2: not UTF-8 text" in msg and "delete that line" in msg and "\n" not in msg
    p.write_bytes(b'{"id": "a"}\n{"id": "b", "generation": "caf\xc3')  # a killed writer cut a character in two
    assert [r["id"] for r in read_jsonl(p)] == ["a"]


def test_a_row_holding_unicode_line_separators_reads_back_as_one_row(tmp_path):
    """Rows are written with ensure_ascii=False: U+2028, U+2029 and U+0085 inside a model's reply
    stay raw in the file, and are not line ends to the reader."""
    log = JsonlLog(tmp_path / "predictions.jsonl")
    reply = "first\u2028second\u2029third\x85fourth"
    log.write({"id": "a", "generation": reply})
    log.write({"id": "b", "generation": "x"})
    assert [(r["id"], r["generation"]) for r in JsonlLog(log.path).read()] == [("a", reply), ("b", "x")]


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    p = tmp_path / "leaderboard.jsonl"
    atomic_write_text(p, "old\n")

    def boom(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_mod.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(p, "new\n")
    assert p.read_text() == "old\n"
    assert [f.name for f in tmp_path.iterdir()] == ["leaderboard.jsonl"]  # no temp file left


def test_unusable_sqlite_cache_is_a_one_line_error(tmp_path):
    p = tmp_path / "llm.sqlite"
    p.write_bytes(b"this is not a database" * 300)
    with pytest.raises(CorruptCacheError) as e:
        KVCache(p).open()
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def _locked() -> sqlite3.OperationalError:
    """What SQLite raises at once, without waiting, when two creations of one file meet in its lock upgrade."""
    exc = sqlite3.OperationalError("database is locked")
    exc.sqlite_errorname = "SQLITE_BUSY"
    return exc


@pytest.mark.parametrize("locked_times", [1, 99])
def test_a_cache_another_process_is_creating_is_opened_again_or_named_as_locked(tmp_path, monkeypatch, locked_times):
    """Two processes creating one cache at once: the one told "database is locked" at once opens
    it again; a lock that does not end is one line saying so, not a damaged cache."""
    p = tmp_path / "llm.sqlite"
    create, calls = KVCache._create_and_check, []

    def meets_a_lock(self):
        calls.append(1)
        if len(calls) <= locked_times:
            raise _locked()
        create(self)

    monkeypatch.setattr(KVCache, "_create_and_check", meets_a_lock)
    monkeypatch.setattr(cache_mod.time, "sleep", lambda seconds: None)
    kv = KVCache(p)
    if locked_times == 1:
        kv.put_many({"k": b"v"})
        assert kv.get("k") == b"v" and len(calls) == 2
        return
    with pytest.raises(T2ExpError) as e:
        kv.open()
    assert not isinstance(e.value, CorruptCacheError) and len(calls) == cache_mod._OPEN_TRIES
    assert str(e.value).startswith(f"{p}: database is locked; another process keeps it locked") and "\n" not in str(e.value)


WRITER = textwrap.dedent(
    """
    import sys
    from t2exp.infra.cache import JsonlLog, KVCache
    log = JsonlLog(sys.argv[1])
    kv = KVCache(sys.argv[2])
    i = 0
    print("ready", flush=True)
    while True:
        log.write({"id": f"q{i}", "generation": "x" * (i % 5000)})
        kv.put_many({f"{sys.argv[3]}-{i}-{j}": b"v" * 100 for j in range(20)})
        i += 1
        if i == 50:
            print("50 written", flush=True)
    """
)


def test_sigkill_mid_write_leaves_readable_caches(tmp_path):
    """Two writers share one SQLite cache; one is SIGKILLed mid-stream. Everything committed
    before the kill is readable, and the log holds only whole records."""
    log_p, kv_p = tmp_path / "p.jsonl", tmp_path / "kv.sqlite"
    KVCache(kv_p)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path / f"p{n}.jsonl" if n else log_p), str(kv_p), f"w{n}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:  # each is mid-stream: 50 records written, still writing
            assert p.stdout.readline().strip() == "50 written"
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    rows = JsonlLog(log_p).read()
    assert rows and [r["id"] for r in rows] == [f"q{i}" for i in range(len(rows))]
    assert log_p.read_bytes().endswith(b"\n")
    kv = KVCache(kv_p)
    n = len(kv)
    assert n > 0 and n % 20 == 0  # whole transactions only
    assert all(json.loads(line) for line in log_p.read_text().splitlines())


def test_a_damaged_page_inside_a_sqlite_cache_is_one_line_not_a_traceback(tmp_path):
    """A page damaged in the middle of embeddings.sqlite is one line naming the file and saying to
    delete it, not `sqlite3.DatabaseError: database disk image is malformed` halfway through a run."""
    from t2exp.infra.cache import CorruptCacheError

    path = tmp_path / "embeddings.sqlite"
    kv = KVCache(path)
    kv.put_many({f"k{i}": os.urandom(512) for i in range(2000)})
    kv._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    kv._conn().close()
    size = path.stat().st_size
    with open(path, "r+b") as f:  # overwrite a page in the middle of the file (past the header page)
        f.seek((size // 4096 // 2) * 4096)
        f.write(b"\xff" * 4096)
    with pytest.raises(CorruptCacheError) as err:
        KVCache(path).get_many([f"k{i}" for i in range(2000)])
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "delete it" in msg


def test_absorb_copies_only_the_entries_a_cache_lacks(tmp_path):
    mine, theirs = KVCache(tmp_path / "a.sqlite"), KVCache(tmp_path / "b.sqlite")
    mine.put_many({"k1": b"mine", "k2": b"two"})
    theirs.put_many({"k1": b"theirs", "k3": b"three"})
    assert mine.absorb(theirs) == 1
    assert mine.get_many(["k1", "k2", "k3"]) == {"k1": b"mine", "k2": b"two", "k3": b"three"}
    assert mine.absorb(theirs) == 0 and len(theirs) == 2


def test_a_full_disk_is_said_as_such_and_the_cache_is_kept(tmp_path):
    """SQLite's own disk-full (SQLITE_FULL, here made real by capping the file's pages): the line
    says the disk is full and to run again; no advice to delete an intact cache."""
    kv = KVCache(tmp_path / "llm.sqlite")
    kv.put("a", b"kept")
    conn = kv._conn()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(T2ExpError) as e:
        kv.put("b", os.urandom(200_000))
    line = str(e.value)
    assert not isinstance(e.value, CorruptCacheError)
    assert line.startswith(str(tmp_path / "llm.sqlite")) and "the disk is full" in line and "delete" not in line
    conn.execute("PRAGMA max_page_count=1073741823")  # space is back
    assert KVCache(tmp_path / "llm.sqlite").get("a") == b"kept"


def test_file_system_faults_are_one_line_naming_the_path_and_the_fix():
    import errno

    from t2exp.errors import os_error_line

    full = os_error_line(OSError(errno.ENOSPC, "No space left on device", "/data/cache/runs/x/predictions.jsonl"))
    assert full == (
        "/data/cache/runs/x/predictions.jsonl: No space left on device; the disk is full: free space and run "
        "the same command again (it resumes; the cache is intact)"
    )
    assert "read-only" in os_error_line(OSError(errno.EROFS, "Read-only file system", "/ro/cache"))
    assert os_error_line(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")).startswith("ConnectionRefusedError: ")


def test_a_cache_path_that_is_a_file_is_one_line(tmp_path):
    from helpers.command import cli
    from t2exp.__main__ import main

    (tmp_path / "cache").write_text("a file, not a directory")
    proc = cli(
        main,
        [
            "generator=none",
            "dataset.limit=1",
            f"paths.cache={tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{tmp_path / 'track' / 'mlflow.db'}",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert str(tmp_path / "cache") in line and "a file stands where a directory is expected" in line, line
    assert "Traceback" not in proc.stderr


@pytest.fixture
def small_tmpfs(tmp_path):
    """An 8 MiB tmpfs the test mounts itself (root only: skipped elsewhere, with the reason): room
    for a new MLflow store, about 1 MiB from MLflow 3.18 on, until the test fills it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()[:200]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(directory, leave: int = 0) -> None:
    """Take every free byte of ``directory``'s file system but ``leave``."""
    free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
    with open(directory / "ballast", "wb") as f:
        try:
            f.write(b"\0" * max(0, free - leave))
        except OSError:
            pass


def _run_app(tmp_path, *extra: str, cache=None):
    from helpers.command import cli
    from t2exp.__main__ import main

    return cli(
        main,
        [
            "rag_method=bm25",
            "generator=none",
            "dataset.limit=2",
            f"paths.work={tmp_path}",
            f"paths.cache={cache or tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{tmp_path / 'track' / 'mlflow.db'}",
            f"hydra.run.dir={tmp_path / 'hydra'}",
            "tracking.traces=false",  # what a full disk meets is the run's own writes, not traces logged as rows arrive
            *extra,
        ],
    )


def test_a_full_artifact_disk_is_one_line_and_the_rerun_logs_what_was_kept(tmp_path, small_tmpfs):
    artifacts = small_tmpfs / "artifacts"
    _fill(small_tmpfs)
    proc = _run_app(tmp_path, f"tracking.artifact_location={artifacts}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert "No space left on device" in line and "Traceback" not in proc.stderr, line
    assert len(list((tmp_path / "cache" / "runs").glob("*/predictions.jsonl"))) == 1  # the work is kept
    (small_tmpfs / "ballast").unlink()  # space is back
    again = _run_app(tmp_path, f"tracking.artifact_location={artifacts}")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming: 4 predictions already in" in again.stdout + again.stderr


def test_a_read_only_cache_is_one_line_naming_it(tmp_path, small_tmpfs):
    cache = small_tmpfs / "cache"
    warm = _run_app(tmp_path, cache=cache)
    assert warm.returncode == 0, warm.stderr[-2000:]
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    proc = _run_app(tmp_path, "k=5", cache=cache)  # another cell: it must write
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert str(cache) in line and ("read-only" in line or "Read-only" in line) and "Traceback" not in proc.stderr, line


def test_a_full_tracking_database_is_one_line_and_keeps_the_predictions(tmp_path, small_tmpfs, monkeypatch):
    """The MLflow store's disk fills while the run works (the test fills it once the predictions
    are written): one line naming tracking.uri, the cause as SQLite gives it and what to do, and
    where the predictions are; no traceback."""
    from t2exp.pipeline import cell

    real = cell.run_steps

    def run_then_fill(components, on_row=None):
        result = real(components, on_row)
        _fill(small_tmpfs)
        return result

    monkeypatch.setattr(cell, "run_steps", run_then_fill)
    proc = _run_app(tmp_path, f"tracking.uri=sqlite:///{small_tmpfs / 'mlflow.db'}", f"tracking.artifact_location={tmp_path / 'art'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert f"tracking.uri=sqlite:///{small_tmpfs / 'mlflow.db'}" in line and "predictions so far are kept in" in line, line
    assert "database or disk is full" in line and "the disk is full: free space" in line, line
    assert "Traceback" not in proc.stderr


def test_a_disk_that_fills_while_the_store_is_created_is_one_line_and_leaves_no_half_store(tmp_path, small_tmpfs):
    """MLflow creating a new SQLite store on a disk that fills meanwhile is one line naming the file
    and the fix, not a traceback from inside its migrations; the half-made store is removed, so no
    later run fails on it, and once there is space again the same call creates it."""
    from t2exp.errors import TrackingError
    from t2exp.tracking.mlflow_run import ensure_tracking

    db = small_tmpfs / "mlflow.db"
    _fill(small_tmpfs, leave=64 * 1024)
    with pytest.raises(TrackingError) as err:
        ensure_tracking(f"sqlite:///{db}", "t2exp", None)
    line = str(err.value)
    assert str(db) in line and "the disk is full: free space and run the same command again" in line, line
    assert "half-made store was removed" in line and not db.exists(), line
    (small_tmpfs / "ballast").unlink()  # space is back
    assert ensure_tracking(f"sqlite:///{db}", "t2exp", None)


def _hydra_app(tmp_path, *extra: str):
    from helpers.command import cli
    from t2exp.__main__ import main

    return cli(main, ["rag_method=bm25", "generator=none", "dataset.limit=1", f"paths.cache={tmp_path / 'cache'}", *extra])


def test_a_read_only_work_dir_is_one_line_naming_it(tmp_path, small_tmpfs):
    """Hydra makes the run's directory under paths.work before the task runs; on a read-only file
    system that is one line naming the directory and the fix, exit 2, no traceback and no work done."""
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    proc = _hydra_app(tmp_path, f"paths.work={small_tmpfs}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert line.startswith(f"t2exp: error: {small_tmpfs / 'outputs'}: ") and "point paths.work" in line, line
    assert "Traceback" not in proc.stderr and not (tmp_path / "cache" / "runs").exists()


def test_a_full_disk_under_the_hydra_run_dir_is_one_line_naming_it(tmp_path, small_tmpfs):
    """Hydra writes .hydra/config.yaml into hydra.run.dir before the task; on a full disk the write
    (through a file object: no file name in the error) is one line naming the run's directory and
    the fix, exit 2, no traceback."""
    _fill(small_tmpfs)
    proc = _hydra_app(tmp_path, f"hydra.run.dir={small_tmpfs / 'run'}", f"tracking.uri=sqlite:///{tmp_path / 'track' / 'mlflow.db'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert line.startswith(f"t2exp: error: {small_tmpfs / 'run'}: No space left on device; the disk is full"), line
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (a Linux device whose every write fails with ENOSPC)")
def test_a_full_disk_while_a_prediction_is_written_names_the_file():
    """A write through a file object on a full disk raises an OSError with no file name; the one
    line still names the file, not only 'OSError: No space left on device'. /dev/full fails every
    write with ENOSPC, as a full disk does."""
    from t2exp.errors import os_error_line
    from t2exp.infra.cache import JsonlLog

    with pytest.raises(OSError) as err:
        JsonlLog("/dev/full").write({"id": "q1", "prediction": 1.0})
    assert os_error_line(err.value).startswith("/dev/full: No space left on device; the disk is full: free space")
