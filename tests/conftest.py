from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# pytest -n N: each worker (and every process it starts) computes with cores // N threads. N
# workers of all-core torch/OpenMP pools oversubscribe the cores, and the pools' spin-waiting then
# slows the model tests several-fold (the 0.5B generator tests: 38 s instead of 93 s in two workers
# on two cores). A value the caller set wins.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(max(1, (os.cpu_count() or 1) // _WORKERS)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# ranx (the metric and fusion oracle of test_oracles.py) is numba code compiled on first use: 90 s of
# a fresh venv's test time for a few dozen synthetic queries. Interpreted, it is the same code; t2exp
# itself uses no numba. Read when numba is imported, so it is set here, before any test module.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")


@pytest.fixture(scope="session")
def corpus_embeddings(tmp_path_factory) -> Path:
    """The default embedder's (MiniLM's) vectors of both bundled corpora, as the embedding cache
    of a real retrieval run holds them (``embeddings.sqlite``): made once per test session, by the
    first xdist worker that asks (the other waits on a lock), and copied into the caches of the
    tests that index the full corpora but are not about embedding them (~70 s a copy saves here)."""
    import shutil
    import sqlite3

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common folder
    target = shared / "corpus_embeddings.sqlite"
    with FileLock(str(shared / "corpus_embeddings.lock")):
        if not target.exists():
            work = shared / "corpus_embeddings_run"
            run_app(["rag_method=base", "generator=none", "dataset.limit=1"], work / "cache", work / "track")
            partial = target.with_suffix(".partial")
            with sqlite3.connect(work / "cache" / "embeddings.sqlite") as src, sqlite3.connect(partial) as dst:
                src.backup(dst)  # a consistent copy, whatever the run's connection left in its WAL
            partial.rename(target)
            shutil.rmtree(work, ignore_errors=True)
    return target


def warm(cache: Path, embeddings: Path) -> Path:
    """``cache`` (a t2exp ``paths.cache``) holding ``embeddings`` as its embedding cache: every
    corpus vector found, nothing else (indices, runs, LLM answers) there yet."""
    import shutil

    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(embeddings, cache / "embeddings.sqlite")
    return cache


@pytest.fixture
def warm_cache(tmp_path, corpus_embeddings) -> Path:
    """A test's own empty cache, but with both corpora's MiniLM vectors (``corpus_embeddings``)."""
    return warm(tmp_path / "cache", corpus_embeddings)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory, corpus_embeddings) -> Path:
    """One cache for the whole test session (embeddings, indices, LLM calls), starting with the
    corpora's MiniLM vectors; models are shared with the project's own cache so the offline
    generator is converted at most once."""
    return warm(tmp_path_factory.mktemp("cache"), corpus_embeddings)


_MLFLOW_TEMPLATE: list[Path] = []  # one migrated MLflow store per test session (seed_tracking)


@pytest.fixture(scope="session", autouse=True)
def _mlflow_template(tmp_path_factory) -> None:
    """Where the session's migrated MLflow store goes; it is made on first use (seed_tracking)."""
    _MLFLOW_TEMPLATE[:] = [tmp_path_factory.mktemp("mlflow_template") / "mlflow.db"]


def seed_tracking(tracking_dir: Path) -> None:
    """Give a test's MLflow store (``tracking_dir/mlflow.db``) the session's migrated copy when it
    has none: MLflow migrates a new SQLite store's schema on first use (~2 s a store), once a
    session now. Only for runs expected to succeed: a refused run must leave no store behind."""
    import shutil

    target = Path(tracking_dir) / "mlflow.db"
    if target.exists() or not _MLFLOW_TEMPLATE:
        return
    template = _MLFLOW_TEMPLATE[0]
    if not template.exists():
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()  # creates and migrates it
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def compose_cfg(*overrides: str):
    """The app's config as ``python -m t2exp <overrides>`` composes it (schemas applied)."""
    from hydra import compose, initialize_config_dir

    from t2exp import config
    from t2exp.infra.paths import CONF_DIR

    config.register()

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def app_overrides(cache: Path, tracking_dir: Path, *, traces: bool = False) -> list[str]:
    """The test's cache and MLflow store. Per-question traces are off unless the test is about them
    (``traces=True``; tests/test_genai.py, tests/test_progress.py): logging them is a third of a
    retrieval run's time (135 questions: 18.1 s with, 12.7 s without)."""
    return [
        *([] if traces else ["tracking.traces=false"]),
        f"paths.cache={cache}",
        f"paths.models={ROOT / '.t2exp_cache' / 'models'}",
        f"tracking.uri=sqlite:///{tracking_dir / 'mlflow.db'}",
        f"tracking.artifact_location={tracking_dir / 'artifacts'}",
        f"hydra.run.dir={tracking_dir / 'hydra'}",
        f"hydra.sweep.dir={tracking_dir / 'multirun'}",
    ]


def run_app(args: list[str], cache: Path, tracking_dir: Path, timeout: float = 900, check: bool = True,
            *, process: bool = False, env: dict[str, str] | None = None, traces: bool = False) -> subprocess.CompletedProcess:
    """``python -m t2exp <args>`` with the test's cache and MLflow store: in this process (the
    entry point ``t2exp.__main__.main`` with this argv, see :func:`cli`), or as a real process
    when the process itself is the subject (``process=True``: signals, a kill, what a fresh
    interpreter reads from its environment). ``timeout`` bounds the real process only."""
    argv = [*args, *app_overrides(cache, tracking_dir, traces=traces)]
    if check:
        seed_tracking(tracking_dir)
    if process:
        cmd = [sys.executable, "-m", "t2exp", *argv]
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", **(env or {})}
        full_env.pop("T2EXP_PARENT_RUN_ID", None)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=full_env)
    else:
        from t2exp.__main__ import main

        proc = cli(main, argv, env=env, prog="t2exp")
    if check and proc.returncode != 0:
        raise AssertionError(f"t2exp failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def cli(main, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT, prog: str = "t2exp",
        replace_env: bool = False) -> subprocess.CompletedProcess:
    """A command-line entry point run in this process as its console script would run it: ``argv``
    as ``sys.argv[1:]``, ``env`` added to the environment (``replace_env``: the whole environment),
    ``cwd`` the working directory; its exit
    status (``SystemExit`` or ``main``'s return value), stdout and stderr come back as a
    ``CompletedProcess``. Everything the command changes in the process is put back: argv, the
    environment (a sweep's parent-run id, moved secrets), the working directory, Hydra's global
    state, an MLflow run left active, the signal handlers and the root logger's handlers."""
    import contextlib
    import io
    import logging
    import signal
    from unittest import mock

    from hydra.core.global_hydra import GlobalHydra

    saved_argv, saved_env, saved_cwd = sys.argv[:], dict(os.environ), os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    if replace_env:
        os.environ.clear()
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", **(env or {})})
    os.environ.pop("T2EXP_PARENT_RUN_ID", None)
    sys.argv = [prog, *argv]
    code: int = 0
    # Hydra re-raises instead of printing its one-line error when it believes a debugger is
    # attached, and it takes any trace function (coverage's tracer) for one.
    not_debugging = mock.patch("hydra._internal.utils.is_under_debugger", return_value=False)
    try:
        os.chdir(cwd)
        GlobalHydra.instance().clear()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), not_debugging:
            try:
                ret = main()
                code = ret if isinstance(ret, int) else 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    err.write(f"{exc.code}\n")
    finally:
        import mlflow
        from hydra.core.hydra_config import HydraConfig

        while mlflow.active_run() is not None:
            mlflow.end_run()
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # a job's config (its runtime.cwd: work_dir) does not outlive the command
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for s, h in saved_signals.items():
            signal.signal(s, h)
        for h in root.handlers[:]:
            if h not in saved_handlers:
                root.removeHandler(h)
                h.close()
        for h in saved_handlers:
            if h not in root.handlers:
                root.addHandler(h)
        root.setLevel(saved_level)
    return subprocess.CompletedProcess([prog, *argv], code, out.getvalue(), err.getvalue())


def mlflow_runs(tracking_dir: Path, experiment: str = "t2exp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tracking_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


@pytest.fixture
def weaviate_wire():
    """The Weaviate stand-in (tests/weaviate_wire): REST + gRPC on free loopback ports, for one test."""
    pytest.importorskip("weaviate")
    from weaviate_wire import WeaviateWire

    with WeaviateWire() as wire:
        yield wire
