"""What one command costs t2exp itself, in a warm process: ``python -m t2exp``'s entry point run
again and again in this process on a retrieval-only cell whose caches are warm, as shipped, and with
each config composed every time it is asked for and each load reading and checking its files (what
the app did before it kept both for the command). The cell's own work is the same in both. Then the
same cell as whole ``python -m t2exp`` processes, pair by pair: as shipped, and with Python's default
thresholds of the cycle collector (``t2exp.infra.collector`` left out).

    python benchmarks/run_overhead.py            # 10 runs of each, after one warm-up run
    python benchmarks/run_overhead.py --quick    # 2 runs of each, 1 process of each (the test suite)

CPU seconds per run (this process's user + system time; a whole process's, its own). Ends with one
``RATIO run_overhead: ...`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, ratio_line

ARGS = ["rag_method=bm25", "generator=none", "dataset.limit=2", "tracking.traces=false"]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Unkept(dict):
    """A cache that keeps nothing: every load reads and checks its files."""

    def __setitem__(self, key, value) -> None:
        pass


@contextlib.contextmanager
def every_time() -> Iterator[None]:
    """The app as it was: each config composed whenever asked for, each subset loaded in full."""
    import t2exp.cli.app as app
    from t2exp.data import loader

    composed_once, kept = app.composed_once, loader._SUBSETS
    app.composed_once, loader._SUBSETS = contextlib.nullcontext, _Unkept()
    try:
        yield
    finally:
        app.composed_once, loader._SUBSETS = composed_once, kept


def cell_argv(work: Path, track: Path) -> list[str]:
    return [
        *ARGS,
        f"paths.work={track}",
        f"paths.cache={work / 'cache'}",
        f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
        f"tracking.artifact_location={work / 'artifacts'}",
        f"hydra.run.dir={track / 'hydra'}",
    ]


# ``python -m t2exp`` with Python's default collector thresholds: the entry point's call left out
DEFAULT_GC = "import t2exp.infra.collector as c\nc.collect_less_often = lambda: None\n"
ENTRY = "import runpy, sys\nsys.argv[0] = 't2exp'\nrunpy.run_module('t2exp', run_name='__main__', alter_sys=True)\n"


def process_cpu(work: Path, i: int, default_gc: bool) -> float:
    """CPU seconds of one whole ``python -m t2exp`` process of the cell."""
    track = work / f"process{i}"
    track.mkdir(parents=True)
    code = (DEFAULT_GC if default_gc else "") + ENTRY
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code, *cell_argv(work, track)], capture_output=True, text=True, cwd=track)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"t2exp {' '.join(ARGS)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def runner(work: Path) -> Callable[[int], None]:
    from t2exp.__main__ import main

    def run(i: int) -> None:
        track = work / f"track{i}"
        track.mkdir(parents=True)
        saved = sys.argv
        sys.argv = ["t2exp", *cell_argv(work, track)]
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"t2exp {' '.join(ARGS)} exited {exc.code}") from None
        finally:
            sys.argv = saved

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="2 runs of each, 1 process of each")
    args = ap.parse_args()
    n = 2 if args.quick else args.runs
    n_processes = 1 if args.quick else args.runs
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        run = runner(Path(tmp))
        run(0)  # warm-up: the store, the index, the imports
        seconds = {}
        for i, (name, mode) in enumerate((("every_time", every_time), ("shipped", contextlib.nullcontext))):
            with mode():
                t0 = cpu()
                for j in range(n):
                    run(1 + i * n + j)
                seconds[name] = (cpu() - t0) / n
            print(f"{name:>10}: {seconds[name]:.3f} CPU-s per run ({n} runs)")
        print(f"t2exp {' '.join(ARGS)}, warm caches, one process")
        processes: dict[bool, list[float]] = {True: [], False: []}
        for j in range(n_processes):  # pair by pair: the machine's speed drifts alike for both
            for default_gc in (True, False):
                processes[default_gc].append(process_cpu(Path(tmp), 2 * j + default_gc, default_gc))
        default_gc_s, shipped_s = (sorted(processes[d])[len(processes[d]) // 2] for d in (True, False))
        print(f"whole process, Python's default collector thresholds: {default_gc_s:.3f} CPU-s (median of {n_processes})")
        print(f"whole process, as shipped: {shipped_s:.3f} CPU-s (median of {n_processes})")
    ratio_line(
        "run_overhead",
        every_time_cpu_s=f"{seconds['every_time']:.3f}",
        shipped_cpu_s=f"{seconds['shipped']:.3f}",
        every_time_over_shipped=f"{seconds['every_time'] / seconds['shipped']:.2f}",
        process_default_gc_cpu_s=f"{default_gc_s:.3f}",
        process_cpu_s=f"{shipped_s:.3f}",
        default_gc_over_shipped=f"{default_gc_s / shipped_s:.2f}",
    )


if __name__ == "__main__":
    main()
