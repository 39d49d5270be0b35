"""The MLflow run a cell logs to (t2exp.tracking.mlflow_run.Tracker), on a real SQLite store."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.net import free_port
from helpers.tracking import MlflowServer
from t2exp.tracking.inspection import traced_rows
from t2exp.tracking.mlflow_run import Tracker


def _subset(name: str) -> SimpleNamespace:
    questions = [SimpleNamespace(split="dev") for _ in range(5)]
    return SimpleNamespace(name=name, sources=["data/finqa.parquet"], content_hash="ab" * 16, questions=questions, corpus=["doc"] * 7)


def test_two_cells_logging_one_dataset_at_once_both_link_it(tmp_path):
    """MLflow reads which datasets exist, then inserts the missing ones. The second cell's insert
    is made to happen between the first cell's read and its insert (a SQLAlchemy event on the
    first cell's INSERT, not timing): the first insert then breaks the unique constraint, as two
    Slurm tasks of one sweep can. Both runs must end with the dataset as their input."""
    import sqlalchemy
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = Tracker(uri, "t2exp", str(tmp_path / "artifacts"), "lancedb", {})
    second = Tracker(uri, "t2exp", str(tmp_path / "artifacts"), "weaviate", {})
    subsets = [_subset("FinQA")]
    engine = first.client._tracking_client.store.engine
    raced: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO DATASETS") and not raced:
            raced.append(statement)
            second.log_inputs(subsets)  # the other task wins the insert

    sqlalchemy.event.listen(engine, "before_cursor_execute", before)
    try:
        first.log_inputs(subsets)
    finally:
        sqlalchemy.event.remove(engine, "before_cursor_execute", before)
    assert raced, "the first cell never inserted the dataset: the race was not staged"
    client = MlflowClient(tracking_uri=uri)
    for tracker in (first, second):
        (logged,) = client.get_run(tracker.run_id).inputs.dataset_inputs
        assert (logged.dataset.name, logged.dataset.digest) == ("FinQA", "ab" * 10)
    datasets = {(d.dataset.name, d.dataset.digest) for t in (first, second) for d in client.get_run(t.run_id).inputs.dataset_inputs}
    assert len(datasets) == 1


def _start_on_a_new_store(uri: str, barrier, out) -> None:
    from t2exp.tracking.mlflow_run import ensure_tracking

    barrier.wait()  # both processes make their first MLflow call at once
    try:
        out.put(("ok", ensure_tracking(uri, "t2exp", None)))
    except BaseException as exc:  # what a run would have shown as a traceback
        out.put(("error", f"{type(exc).__name__}: {exc}"[:300]))


@pytest.mark.full
@pytest.mark.slow
def test_two_processes_starting_on_a_new_store_both_get_it(tmp_path):
    """Two runs started together on a new SQLite store: MLflow creates and migrates the schema on
    first use, and two processes doing that at once broke each other (table already exists,
    duplicate column). Two new stores, two processes each, released by one barrier."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    for attempt in range(2):
        uri = f"sqlite:///{tmp_path / str(attempt) / 'mlflow.db'}"
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_start_on_a_new_store, args=(uri, barrier, out)) for _ in range(2)]
        for p in procs:
            p.start()
        results = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert [r[0] for r in results] == ["ok", "ok"], results
        assert results[0][1] == results[1][1]  # one experiment, not two


@pytest.mark.full
@pytest.mark.slow
def test_two_plain_runs_started_together_on_an_empty_dir_both_finish(tmp_path, warm_cache):
    """Two plain runs (no -m) started together in one new directory both finish, with no "table
    already exists" or "duplicate column": the client is opened, and the store created, under the
    lock that guards its creation. Two cells (seeds 0 and 1: one cell twice
    is serialised by its cell lock before any MLflow call), two new directories, real processes
    started together; both must exit 0 and the store hold both runs. (Two pairs, not three: each
    pair is costly in CPU.)"""
    from helpers.paths import ROOT
    from helpers.tracking import mlflow_runs

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    cache = warm_cache  # the corpus vectors in it; shared: after the first pair the index is built, and both reach MLflow at once
    for attempt in range(2):
        work = tmp_path / f"work{attempt}"
        work.mkdir()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "t2exp",
                    "generator=none",
                    "dataset.limit=2",
                    f"seed={seed}",
                    "tracking.traces=false",
                    f"paths.work={work}",
                    f"paths.cache={cache}",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for seed in (0, 1)
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[-2000:] for o in outs]
        _, runs = mlflow_runs(work / "mlruns")
        assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"], attempt


def _damaged_store(tmp_path, kind: str):
    """A store file a run cannot open: not SQLite, or migrated by an MLflow of another version."""

    db = tmp_path / kind / "mlflow.db"
    db.parent.mkdir()
    if kind == "not_sqlite":
        db.write_text("experiment notes, not a database\n" * 50)
    else:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'made' / 'mlflow.db'}").search_experiments()
        (tmp_path / "made" / "mlflow.db").rename(db)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE alembic_version SET version_num = 'f00dfeed1234'")  # a revision this MLflow does not know
    return db


@pytest.mark.parametrize(
    "kind,says", [("not_sqlite", "is not an SQLite database"), ("other_version", "holds the schema of another MLflow version")]
)
def test_a_store_file_mlflow_cannot_open_is_one_line_naming_it(tmp_path, kind, says):
    """A store file MLflow cannot open (the first file the client's constructor opens) is one
    TrackingError naming the file and the fix, not a traceback from deep inside SQLAlchemy or
    MLflow, and the file is left as it was."""
    from t2exp.errors import TrackingError
    from t2exp.tracking.mlflow_run import ensure_tracking

    db = _damaged_store(tmp_path, kind)
    before = db.read_bytes()
    with pytest.raises(TrackingError) as err:
        ensure_tracking(f"sqlite:///{db}", "t2exp", None)
    line = str(err.value)
    assert str(db) in line and says in line and "\n" not in line, line
    assert ("mlflow db upgrade" in line) == (kind == "other_version") and "point tracking.uri at" in line, line
    assert db.read_bytes() == before


EARLIER_STORE = Path(__file__).with_name("mlflow-3.17.2.db.gz")  # an empty store MLflow 3.17.2 made (its Default experiment)


def _store_of_an_earlier_mlflow(db: Path) -> str:
    """The store MLflow 3.17.2 made, at ``db``; its URI. Where MLflow 3.17 itself runs, the copy is
    taken one migration back (alembic's downgrade), so that it is older than this MLflow's schema too."""
    import gzip

    import sqlalchemy
    from alembic import command
    from mlflow.store.db.utils import _get_alembic_config, _get_latest_schema_revision

    db.write_bytes(gzip.decompress(EARLIER_STORE.read_bytes()))
    uri = f"sqlite:///{db}"
    with sqlite3.connect(db) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    if revision == _get_latest_schema_revision():
        engine = sqlalchemy.create_engine(uri)
        with engine.begin() as conn:
            config = _get_alembic_config(uri)
            config.attributes["connection"] = conn
            command.downgrade(config, "-1")
        engine.dispose()
    return uri


def test_a_store_made_by_an_earlier_mlflow_is_one_line_and_never_upgraded(tmp_path):
    """A store an earlier MLflow made (empty: a store that holds runs reads alike) is never
    upgraded silently, neither by a run nor by a command that reads runs (MLflow itself creates the
    tables of a newer schema it misses): one line naming the store, that the upgrade is one-way
    for every client of it, and the command; exit 2; the file is left byte for byte."""
    from helpers.app import run_app
    from t2exp.errors import TrackingError
    from t2exp.infra.mlflow_store import open_client

    db = tmp_path / "track" / "mlflow.db"
    db.parent.mkdir()
    uri = _store_of_an_earlier_mlflow(db)
    before = db.read_bytes()
    proc = run_app(["generator=none", "dataset.limit=1"], tmp_path / "cache", db.parent, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert line.startswith(f"t2exp: error: tracking.uri={uri}: {db} ") and "Traceback" not in proc.stderr, line
    assert f"'mlflow db upgrade {uri}'" in line and "one-way for every client" in line, line
    with pytest.raises(TrackingError) as err:
        open_client(uri, "--tracking-uri", create=False).search_experiments()
    assert str(err.value).startswith(f"--tracking-uri={uri}: {db} ") and "mlflow db upgrade" in str(err.value), err.value
    assert db.read_bytes() == before
    assert not (tmp_path / "cache" / "runs").exists()


@contextmanager
def _at_migration_step(prefix: str, nth: int, act: Callable[[], None]) -> Iterator[list[str]]:
    """``act()`` runs when the ``nth`` SQL statement starting with ``prefix`` is about to run (a
    SQLAlchemy event on every engine: MLflow's migrations of a new store, step by step)."""
    import sqlalchemy
    from sqlalchemy.engine import Engine

    seen: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if " ".join(statement.split()).startswith(prefix):
            seen.append(statement)
            if len(seen) == nth:
                act()

    sqlalchemy.event.listen(Engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        sqlalchemy.event.remove(Engine, "before_cursor_execute", before)


# two steps of a new store's migrations: inside one (the copy of a table MLflow rebuilds), and between two
_STEPS = {"inside a migration": ("INSERT INTO _alembic_tmp_metrics", 1), "between migrations": ("UPDATE alembic_version", 30)}


@pytest.mark.full
@pytest.mark.parametrize("signame,step", [("SIGTERM", "inside a migration"), ("SIGINT", "between migrations")])
def test_a_signal_while_a_new_store_is_created_leaves_one_the_next_run_opens(tmp_path, monkeypatch, signame, step):
    """SIGTERM or Ctrl-C while MLflow migrates a new store, as the app handles them (a second
    signal, or the first with no grace, stops at once): the signal is sent from inside the process
    at a chosen migration step. The next open of the same store works, and no file is left beside it."""
    from mlflow.tracking import MlflowClient

    from t2exp.pipeline.stop import STOP_GRACE_ENV, Interrupted, StopOnSignals
    from t2exp.tracking.mlflow_run import ensure_tracking

    monkeypatch.setenv(STOP_GRACE_ENV, "0")
    db = tmp_path / "track" / "mlflow.db"
    uri = f"sqlite:///{db}"
    prefix, nth = _STEPS[step]
    with _at_migration_step(prefix, nth, lambda: signal.raise_signal(getattr(signal, signame))) as seen:
        with pytest.raises(Interrupted), StopOnSignals():
            ensure_tracking(uri, "t2exp", None)
    assert len(seen) == nth, "the migrations never reached the chosen step: nothing was interrupted"
    exp_id = ensure_tracking(uri, "t2exp", None)
    assert exp_id and MlflowClient(tracking_uri=uri).get_experiment_by_name("t2exp").experiment_id == exp_id
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db", "mlflow.db-init.lock"]


_KILL_AT_STEP = """
import os, signal, sys
import sqlalchemy
from sqlalchemy.engine import Engine
from t2exp.tracking.mlflow_run import ensure_tracking

def before(conn, cursor, statement, *rest):
    if statement.lstrip().startswith("INSERT INTO _alembic_tmp_metrics"):
        os.kill(os.getpid(), signal.SIGKILL)

sqlalchemy.event.listen(Engine, "before_cursor_execute", before)
ensure_tracking(sys.argv[1], "t2exp", None)
"""


@pytest.mark.full
def test_a_process_killed_while_it_creates_a_new_store_leaves_nothing_the_next_run_fails_on(tmp_path):
    """SIGKILL (no handler runs) in the middle of a new store's migrations, sent by the process
    itself at that step: the next run opens the store, and nothing the killed one began is left."""
    from t2exp.tracking.mlflow_run import ensure_tracking

    db = tmp_path / "track" / "mlflow.db"
    uri = f"sqlite:///{db}"
    proc = subprocess.run([sys.executable, "-c", _KILL_AT_STEP, uri], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert ensure_tracking(uri, "t2exp", None)
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db", "mlflow.db-init.lock"]


def test_a_half_migrated_store_with_no_run_is_one_line_saying_it_can_be_deleted(tmp_path):
    """A store MLflow itself began and never finished (its migrations cut off by Ctrl-C, here a
    KeyboardInterrupt at the copy of a table it rebuilds): every later open failed with MLflow's
    'table _alembic_tmp_… already exists'. One line: the file, that its creation was cut off and
    it holds no run, and that it can be deleted; the file is left as it was."""
    from mlflow.tracking import MlflowClient

    from t2exp.errors import TrackingError
    from t2exp.tracking.mlflow_run import ensure_tracking

    def interrupt() -> None:
        raise KeyboardInterrupt

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    with _at_migration_step("INSERT INTO _alembic_tmp_metrics", 1, interrupt) as seen, suppress(KeyboardInterrupt, Exception):
        MlflowClient(tracking_uri=uri)  # alembic's clean-up after the interrupt raises an error of its own
    assert seen, "the migrations never reached the chosen step: nothing was interrupted"
    before = db.read_bytes()
    with pytest.raises(TrackingError) as err:
        ensure_tracking(uri, "t2exp", None)
    line = str(err.value)
    assert line.startswith(f"tracking.uri={uri}: {db} ") and "\n" not in line, line
    assert "half-migrated" in line and "holds no run" in line and f"delete {db}" in line, line
    assert db.read_bytes() == before


def test_a_database_mlflow_did_not_begin_is_never_called_half_migrated(tmp_path):
    """Only a store MLflow began (its experiments table) is called half-migrated and deletable:
    another program's SQLite database, or a file that is not SQLite, is not."""

    from t2exp.infra.sqlite_store import half_migrated

    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    text = tmp_path / "mlflow.db"
    text.write_text("experiment notes, not a database\n" * 50)
    assert half_migrated(other) is None and half_migrated(text) is None


def test_a_sweep_on_a_store_file_that_is_not_sqlite_is_one_line(tmp_path):
    """The sweep's first MLflow call (its parent run, in the launching process) on such a file:
    the same line, exit 2, no cell run."""
    from helpers.app import run_app

    db = _damaged_store(tmp_path, "not_sqlite")
    proc = run_app(["-m", "rag_method=bm25", "seed=0,1", "generator=none", "dataset.limit=1"], tmp_path / "cache", db.parent, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert f"{db} is not an SQLite database" in line and "Traceback" not in proc.stderr, line
    assert not (tmp_path / "cache" / "runs").exists()


def test_a_sweep_whose_parent_run_cannot_be_created_stops_with_one_line(tmp_path):
    """Hydra turns a callback's exception into a warning: the sweep must not run its cells without
    a parent run (orphans, no report) and exit 0. The experiment here cannot be created (its
    artifact location is a file): one line naming tracking.uri, exit 2, no cell run."""
    from helpers.app import run_app

    (tmp_path / "track").mkdir()
    (tmp_path / "track" / "artifacts").write_text("not a directory")
    proc = run_app(
        ["-m", "rag_method=base,hybrid", "generator=none", "dataset.limit=1"], tmp_path / "cache", tmp_path / "track", check=False
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert "tracking.uri=sqlite:///" in line and "parent run could not be created" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "runs").exists()  # no cell ran


def test_a_tracking_uri_of_no_store_kind_is_one_config_line():
    from helpers.app import compose_cfg
    from t2exp import config
    from t2exp.errors import ConfigError

    with pytest.raises(ConfigError, match=r"tracking.uri.*foo://bar.*sqlite:///PATH"):
        config.check(compose_cfg("tracking.uri=foo://bar"))
    for ok in ("http://127.0.0.1:5000", "sqlite:////tmp/x.db", "./mlruns", "postgresql+psycopg2://u@h/db"):
        config.check(compose_cfg(f"tracking.uri={ok}"))


def test_an_experiment_name_mlflow_refuses_is_one_config_line_naming_it():
    """An experiment name longer than MLflow allows is refused by the config check, which names the
    key and MLflow's limit, not reported as a tracking.uri problem when the run is opened."""
    from mlflow.utils.validation import MAX_EXPERIMENT_NAME_LENGTH

    from helpers.app import compose_cfg
    from t2exp import config
    from t2exp.config.schema import MLFLOW_MAX_EXPERIMENT_NAME
    from t2exp.errors import ConfigError

    assert MLFLOW_MAX_EXPERIMENT_NAME == MAX_EXPERIMENT_NAME_LENGTH
    for key in ("experiment_name", "tracking.experiment"):
        with pytest.raises(ConfigError) as err:
            config.check(compose_cfg(f"{key}={'x' * 1000}"))
        line = str(err.value)
        assert line.startswith(f"{key}=") and "(1000 characters)" in line and "at most 500 characters" in line, line
        assert "tracking.uri" not in line and len(line) < 300, line
    config.check(compose_cfg(f"experiment_name={'x' * 500}"))


def test_no_server_at_the_tracking_uri_is_one_line_before_any_work(tmp_path):
    from t2exp.errors import TrackingError

    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens: the check answers at once, no retries
    with pytest.raises(TrackingError, match=r"tracking.uri=http://127\.0\.0\.1:\d+: no MLflow server answers.*mlflow server"):
        Tracker(uri, "t2exp", None, "run", {})


class _BasicAuthServer:
    """A loopback HTTP server that answers only requests with HTTP basic auth of ``user``/``p@ss``
    (401 otherwise): ``/health`` as MLflow's server does, any other request with an empty
    experiment list. ``seen`` holds each request's path and Authorization header."""

    def __init__(self) -> None:
        import base64
        import http.server
        import threading

        good = "Basic " + base64.b64encode(b"user:p@ss").decode()
        seen: list[tuple[str, str | None]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the http.server hook
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                auth = self.headers.get("Authorization")
                seen.append((self.path.split("?")[0], auth))
                code, body = (200, b"OK" if self.path == "/health" else b'{"experiments": []}') if auth == good else (401, b"")
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # MLflow's searches are POSTs

            def log_message(self, *args) -> None:
                pass

        self.seen = seen
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_tracking_uri_with_basic_auth_passes_the_health_check_as_mlflow_does(monkeypatch):
    """tracking.uri=http://user:pw@host:port passes the health check (urllib does not read
    'pw@host' as the port), as MLflow's client sends the URL's userinfo as basic auth.
    The check sends what MLflow sends: the same Authorization header reaches the server from
    both; a wrong password is one line about the credentials, not 'no server'."""
    from mlflow.tracking import MlflowClient

    from t2exp.errors import TrackingError
    from t2exp.tracking.mlflow_run import _check_server

    for var in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    server = _BasicAuthServer()
    try:
        uri = f"http://user:p%40ss@127.0.0.1:{server.port}"
        _check_server(uri)
        assert MlflowClient(tracking_uri=uri).search_experiments() == []
        (health, check_auth), (api, mlflow_auth) = server.seen
        assert health == "/health" and api.startswith("/api/") and check_auth == mlflow_auth is not None
        with pytest.raises(TrackingError, match=r"refused the credentials \(HTTP 401\).*MLFLOW_TRACKING_USERNAME") as err:
            _check_server(f"http://user:wrong@127.0.0.1:{server.port}")
        assert "no MLflow server answers" not in str(err.value)
    finally:
        server.close()


@pytest.mark.full
@pytest.mark.slow
def test_a_tracking_server_that_dies_mid_run_costs_one_line_and_no_work(tmp_path, monkeypatch):
    """The server is killed once the run's predictions are written, before its metrics are
    logged: the run ends with one line (not minutes of retries and tracebacks), the predictions
    stay, and the same command once the server is back logs them without answering anything again."""
    from helpers.command import cli
    from t2exp.__main__ import main
    from t2exp.pipeline import cell

    server = MlflowServer(tmp_path).start()
    real = cell.run_steps

    def run_then_lose_the_server(components, on_row=None):
        result = real(components, on_row)
        server.kill()
        return result

    argv = [
        "rag_method=bm25",
        "generator=none",
        "dataset.limit=2",
        f"paths.work={tmp_path}",
        f"paths.cache={tmp_path / 'cache'}",
        f"tracking.uri={server.uri}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    try:
        monkeypatch.setattr(cell, "run_steps", run_then_lose_the_server)
        proc = cli(main, argv)
        monkeypatch.setattr(cell, "run_steps", real)
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
        assert f"tracking.uri={server.uri}" in line and "predictions so far are kept in" in line, line
        assert "Traceback" not in proc.stderr
        kept = list((tmp_path / "cache" / "runs").glob("*/predictions.jsonl"))
        assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 4  # 2 FinQA + 2 TAT-DQA
        server.start()
        again = cli(main, argv)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "resuming: 4 predictions already in" in again.stdout + again.stderr
        from mlflow.tracking import MlflowClient

        runs = MlflowClient(tracking_uri=server.uri).search_runs(
            [MlflowClient(tracking_uri=server.uri).get_experiment_by_name("t2exp").experiment_id]
        )
        assert len(runs) == 2 and [r.info.status for r in runs].count("FINISHED") == 1  # the first's end could not be written
    finally:
        server.kill()


def test_traces_of_two_runs_over_the_same_questions_cover_the_same_ids(tmp_path):
    """The traced rows of two runs, traced on a real store: one run's rows in question order, the
    other's in another order with a repeated row (a resumed run's); past the limit both trace each
    question once, the same questions."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rows = [
        {
            "id": f"q{i}",
            "subset": "FinQA" if i % 2 else "TAT-DQA",
            "question": f"question {i}",
            "context_id": "g",
            "retrieved": ["g", "x"],
            "mrr_at_3": 1.0,
            "prediction": 1.0,
        }
        for i in range(7)
    ]
    ids = {}
    for name, its_rows in {"a": rows, "b": [*rows[::-1], rows[2]]}.items():
        tracker = Tracker(uri, "t2exp", str(tmp_path / "artifacts"), name, {})
        traced = [(tracker.trace(r, 3, {}), r) for r in traced_rows(its_rows, limit=4)]
        tracker.end_traces(traced, 3)
        assert len(traced) == 4
        found = tracker.client.search_traces(locations=[tracker.experiment_id], run_id=tracker.run_id)
        ids[name] = sorted(t.info.tags["t2exp.question_id"] for t in found)
        tracker.finish()
    assert ids["a"] == ids["b"] and len(set(ids["a"])) == 4


def test_a_sweep_ends_with_the_experiment_page_in_the_runs_view(tmp_path):
    """MLflow 3.17 opens ``#/experiments/<id>`` on the GenAI overview in a new browser,
    behind a one-time notice, whatever the experiment's kind tag says; the runs view is one address
    away (``?workflowType=machine_learning``). Each cell's footer and the sweep's end print that
    address of the experiment the runs are in, after the command that serves the store, and the
    sweep's end names its parent run (the first row there)."""
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    proc = run_app(["-m", "rag_method=bm25", "seed=0,1", "generator=none", "dataset.limit=1"], tmp_path / "cache", tmp_path)
    client, runs = mlflow_runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    page = f"http://127.0.0.1:5000/#/experiments/{parent.info.experiment_id}?workflowType=machine_learning"
    cells = [ln for ln in proc.stderr.splitlines() if "inspect: " in ln]  # each cell's footer
    assert cells == [f"inspect: mlflow ui --backend-store-uri {uri}, then {page}"] * 2, proc.stderr[-3000:]
    (end,) = [ln for ln in proc.stdout.splitlines() if "inspect: " in ln]  # Hydra's log of the launching process
    assert end.endswith(
        f"inspect: mlflow ui --backend-store-uri {uri}, then {page} (the sweep's parent run first: {parent.info.run_name})"
    ), end


def test_the_experiment_page_of_a_tracking_server_is_its_own_address_without_a_password():
    from t2exp.tracking.summary import ui_line

    assert (
        ui_line("http://u:secret@host:5000/", "3") == "inspect: open http://u:***@host:5000/#/experiments/3?workflowType=machine_learning"
    )


def test_a_run_whose_process_ended_is_gone_even_before_it_is_reaped():
    """``t2exp status`` tells a RUNNING run killed when its process has ended, also while that
    process waits for its parent to reap it (a zombie keeps its id); a live process is not gone."""
    from t2exp.infra.mlflow_store import Tag
    from t2exp.tracking.inspection import process_gone, process_tags

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped
        assert process_gone({**process_tags(), Tag.PID: str(proc.pid)})
    finally:
        proc.wait()
    assert process_gone({**process_tags(), Tag.PID: str(proc.pid)})
    assert not process_gone(process_tags())


def test_a_store_fault_whose_causes_loop_back_is_still_one_line(tmp_path):
    """An error whose chain of causes loops back on itself (a wrapper raised from the error it
    wraps) reads as one line: what was said, the store's file and the fix."""
    from t2exp.infra.sqlite_store import driver_words, store_fault

    wrapper, driver = RuntimeError("wrapper"), ValueError("driver")
    wrapper.__cause__, driver.__cause__ = driver, wrapper
    assert driver_words(wrapper) == "wrapper"
    line = store_fault("sqlite:///x/mlflow.db", tmp_path / "mlflow.db", wrapper)
    assert "could not be opened (RuntimeError: wrapper)" in line and "\n" not in line


@pytest.mark.parametrize("option", ["--tracking-uri", "--tracking"])
def test_the_login_of_a_commands_tracking_uri_moves_out_of_its_lines(option, monkeypatch, capsys):
    """A command's ``--tracking-uri`` (or the prefix of it argparse takes) with a login: the login
    moves to MLflow's variables, and the command's lines show the URL without it."""
    from t2exp.cli import run_command

    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.setenv(name, "")
    uri = f"http://me:pw-on-the-line@127.0.0.1:{free_port()}"
    assert run_command("report", [option, uri, "--errors", "some-run"]) == 2
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == "pw-on-the-line"
    assert "pw-on-the-line" not in capsys.readouterr().err


def test_a_sweep_of_more_cells_than_a_page_of_runs_is_failed_by_a_cell_on_its_last_page(tmp_path, monkeypatch):
    """A sweep's end reads every cell run, past the first page of MLflow's search (here a page of
    two runs): when only its newest cell FAILED, the sweep's parent run closes FAILED."""
    from helpers.tracking import seed_tracking
    from t2exp.infra import mlflow_store
    from t2exp.infra.mlflow_store import open_client
    from t2exp.tracking.callbacks import close_sweep

    monkeypatch.setattr(mlflow_store, "PAGE", 2)
    seed_tracking(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = open_client(uri)
    exp = client.create_experiment("t2exp", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(exp).info.run_id
    for i in range(5):
        run = client.create_run(exp, start_time=i + 1, tags={"mlflow.parentRunId": parent})
        client.set_terminated(run.info.run_id, "FAILED" if i == 4 else "FINISHED")
    assert close_sweep(uri, parent, tmp_path) == "FAILED"
