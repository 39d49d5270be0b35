"""The tests' fixtures and the environment every test process starts with. What tests share that is
no fixture lives in tests/helpers/ (imported as ``helpers.*``, never from here)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from t2exp.infra.collector import collect_less_often

# each test process collects as a t2exp process does: before the imports that the tests' modules make
collect_less_often()

from helpers.app import run_app  # noqa: E402
from helpers.caches import warm  # noqa: E402
from helpers.paths import ROOT  # noqa: E402
from helpers.tracking import MLFLOW_TEMPLATE  # noqa: E402

# pytest -n N: each worker (and every process it starts) computes with cores // N threads. N
# workers of all-core torch/OpenMP pools oversubscribe the cores, and the pools' spin-waiting then
# slows the model tests several-fold (the 0.5B generator tests, in two workers on two cores). A
# value the caller set wins.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(max(1, (os.cpu_count() or 1) // _WORKERS)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# ranx (the metric and fusion oracle of test_oracles.py) is numba code compiled on first use: a large
# share of a fresh venv's test time for a few dozen synthetic queries. Interpreted, it is the same code; t2exp
# itself uses no numba. Read when numba is imported, so it is set here, before any test module.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")


# Where the app writes under its working directory by default. A test that runs it from the checkout
# leaves its outputs there (CI's wheel check, which runs beside the tests, fails on exactly that);
# the session fails when one does.
# .t2exp_cache/models is the offline generators' conversion, shared with the checkout on purpose.
_CHECKOUT_OUTPUTS = ("outputs", "multirun", "mlruns", ".t2exp_cache")
_STARTED = pytest.StashKey[float]()


# The files whose first test pays a cost once for the whole run (the offline 0.5B generator's
# conversion; the corpora's vectors, made by the first test that asks for the shared cache; a
# module's real sweep): xdist hands them out first, so that no worker starts one near the end while
# the others are idle. Then the files none of whose tests reads the corpora's vectors, then those
# that do (by then made: a worker does not wait on the lock of a tier that makes them, its own or
# one running beside it), each group most tests first (`make` passes --no-loadscope-reorder, so xdist
# keeps the order this hook gives).
_FIRST = ("tests/generators/test_local_generator.py", "tests/evaluation/test_compare.py")


# (marker, file) of every collected test marked full or bench, deselected or not: `make full` and
# `make bench` collect only the files that name their marker (helpers.tiers), so a test marked in
# another way, in another file, would never run in CI; the run fails instead.
_TIER_MARKED = pytest.StashKey[set]()


def pytest_itemcollected(item) -> None:
    for marker in ("full", "bench"):
        if item.get_closest_marker(marker):
            item.config.stash.setdefault(_TIER_MARKED, set()).add((marker, item.nodeid.split("::")[0]))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    from helpers.tiers import files_marked

    marked = config.stash.get(_TIER_MARKED, set())
    for marker in sorted({m for m, _ in marked}):
        if missed := sorted({f for m, f in marked if m == marker} - set(files_marked(marker))):
            raise pytest.UsageError(
                f"tests marked {marker} in {', '.join(missed)}, which `make {marker}` does not collect: "
                f"write pytest.mark.{marker} in the file"
            )
    tests_in = Counter(item.nodeid.split("::")[0] for item in items)
    vectors = {item.nodeid.split("::")[0] for item in items if "corpus_embeddings" in getattr(item, "fixturenames", ())}

    def rank(item) -> tuple[int, bool, int]:
        file = item.nodeid.split("::")[0]
        return (_FIRST.index(file) if file in _FIRST else len(_FIRST), file in vectors, -tests_in[file])

    items.sort(key=rank)  # stable: a file's tests keep their order


def _written_into_checkout(since: float) -> list[str]:
    found = []
    for top in _CHECKOUT_OUTPUTS:
        for folder, dirs, files in os.walk(ROOT / top):
            if Path(folder) == ROOT / ".t2exp_cache":
                dirs[:] = [d for d in dirs if d != "models"]
            for name in files:
                path = Path(folder) / name
                try:
                    if path.stat().st_mtime >= since:
                        found.append(str(path.relative_to(ROOT)))
                except FileNotFoundError:
                    continue
    return sorted(found)


# A process a test starts and leaves running (loky's workers of an in-process local_parallel sweep:
# hundreds of MB each) outlives the session. Each pytest process checks its own children at the end
# (an xdist worker hands its list to the controller, which reports every one and fails the session);
# the controller's xdist workers are not the tests', nor are multiprocessing's and loky's resource
# trackers, which end with the process that started them. Daemons started outside pytest (CI's
# PostgreSQL, Slurm) are no child of it.
_LEFT = "t2exp_processes_left"
_WORKERS_LEFT = pytest.StashKey[list[str]]()
_WORKER_PIDS = pytest.StashKey[set[int]]()
_STARTED_BY: dict[int, str] = {}  # a child process of this pytest process -> the test it was first seen after


def _children() -> list:
    import psutil

    return psutil.Process().children(recursive=True)


def pytest_runtest_logfinish(nodeid, location) -> None:
    for child in _children():
        _STARTED_BY.setdefault(child.pid, nodeid)


def _processes_left(session_name: str, skip: set[int]) -> list[str]:
    import psutil

    from t2exp.infra.signals import is_resource_tracker

    left = []
    for child in _children():
        try:
            if child.pid in skip or child.status() == psutil.STATUS_ZOMBIE or is_resource_tracker(child.pid):
                continue
            by = _STARTED_BY.get(child.pid, "a session fixture")
            left.append(f"{session_name}: pid {child.pid} (started by {by}): {' '.join(child.cmdline())[:300]}")
        except psutil.NoSuchProcess:  # ended meanwhile
            continue
    return left


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """An xdist worker ended (the controller): its list of processes left, and its own pid."""
    output = getattr(node, "workeroutput", {})
    node.config.stash.setdefault(_WORKERS_LEFT, []).extend(output.get(_LEFT, []))
    node.config.stash.setdefault(_WORKER_PIDS, set()).add(output.get("pid", -1))


def pytest_sessionstart(session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        session.config.stash[_STARTED] = time.time()


def pytest_sessionfinish(session, exitstatus) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: its controller reports what it left
        config.workeroutput[_LEFT] = _processes_left(config.workerinput["workerid"], set())
        config.workeroutput["pid"] = os.getpid()
        return
    left = config.stash.get(_WORKERS_LEFT, []) + _processes_left("controller", config.stash.get(_WORKER_PIDS, set()))
    if left:
        _fail_session(session, f"tests left {len(left)} process(es) running: end them in the test or its fixture", left)
    since = config.stash.get(_STARTED, None)
    written = _written_into_checkout(since) if since is not None else []
    if written:
        _fail_session(session, f"tests wrote {len(written)} file(s) into the checkout: run the app from the test's own folder", written)


def _fail_session(session, title: str, lines: list[str]) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.write("\n")
        reporter.write_sep("=", title, red=True)
        for line in lines[:20]:
            reporter.write_line(line)
    else:
        print(title, *lines[:20], sep="\n")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _corpus_embeddings_name() -> str:
    """The file name of the corpora's vectors, by what makes them: the bundled data, the default
    embedder's config and code, and sentence-transformers' version (the cache inside is keyed by
    text and model as well: a stale file only misses)."""
    import hashlib
    from importlib.metadata import version

    h = hashlib.sha256(version("sentence-transformers").encode())
    for path in sorted(
        [
            *(ROOT / "data" / "t2ragbench").glob("*.parquet"),
            ROOT / "conf" / "embedder" / "minilm.yaml",
            *(ROOT / "src" / "t2exp" / "embedders").glob("*.py"),
        ]
    ):
        h.update(path.name.encode() + path.read_bytes())
    return f"corpus_embeddings-{h.hexdigest()[:16]}.sqlite"


@pytest.fixture(scope="session")
def corpus_embeddings(request, tmp_path_factory) -> Path:
    """The default embedder's (MiniLM's) vectors of both bundled corpora, as the embedding cache
    of a real retrieval run holds them (``embeddings.sqlite``), copied into the caches of the tests
    that index the full corpora but are not about embedding them (each copy saves embedding them
    again). Made once, by the first xdist worker that asks (the other waits on a lock), and kept in
    pytest's cache folder for the next session (`make test`, then `make full`) while the data and
    the embedder stay the same."""
    import shutil
    import sqlite3

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common folder
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    kept = Path(cache.mkdir("t2exp")) if cache is not None else shared
    target = kept / _corpus_embeddings_name()
    with FileLock(str(kept / "corpus_embeddings.lock")):
        if not target.exists():
            work = shared / "corpus_embeddings_run"
            run_app(["rag_method=base", "generator=none", "dataset.limit=1"], work / "cache", work / "track")
            partial = target.with_suffix(".partial")
            with sqlite3.connect(work / "cache" / "embeddings.sqlite") as src, sqlite3.connect(partial) as dst:
                src.backup(dst)  # a consistent copy, whatever the run's connection left in its WAL
            partial.rename(target)
            shutil.rmtree(work, ignore_errors=True)
    return target


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


@pytest.fixture(scope="session", autouse=True)
def _mlflow_template(tmp_path_factory) -> None:
    """Where the session's migrated MLflow store goes; it is made on first use (seed_tracking)."""
    MLFLOW_TEMPLATE[:] = [tmp_path_factory.mktemp("mlflow_template") / "mlflow.db"]


@pytest.fixture
def weaviate_wire():
    """The Weaviate stand-in (tests/weaviate_wire): REST + gRPC on free loopback ports, for one test."""
    pytest.importorskip("weaviate")
    from weaviate_wire import WeaviateWire

    with WeaviateWire() as wire:
        yield wire


@pytest.fixture(autouse=True)
def _secrets_forgotten_after_each_test():
    """A key a test's component read stays a secret of that test only: t2exp keeps the keys it
    read for the rest of its process, which here holds every test."""
    yield
    from t2exp.infra.redaction import forget_secrets

    forget_secrets()
