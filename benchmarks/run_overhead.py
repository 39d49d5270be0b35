"""What one command costs t2exp itself, in a warm process: ``python -m t2exp``'s entry point run
again and again in this process on a retrieval-only cell whose caches are warm, as shipped, and with
each config composed every time it is asked for and each load reading and checking its files (what
the app did before it kept both for the command). The cell's own work is the same in both.

    python benchmarks/run_overhead.py            # 10 runs of each, after one warm-up run
    python benchmarks/run_overhead.py --quick    # 2 runs of each (the test suite)

CPU seconds per run (this process's user + system time). Ends with one ``RATIO run_overhead: ...`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
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


def runner(work: Path) -> Callable[[int], None]:
    from t2exp.__main__ import main

    def run(i: int) -> None:
        track = work / f"track{i}"
        track.mkdir(parents=True)
        argv = [
            *ARGS,
            f"paths.work={track}",
            f"paths.cache={work / 'cache'}",
            f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
            f"tracking.artifact_location={work / 'artifacts'}",
            f"hydra.run.dir={track / 'hydra'}",
        ]
        saved = sys.argv
        sys.argv = ["t2exp", *argv]
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
    ap.add_argument("--quick", action="store_true", help="2 runs of each")
    args = ap.parse_args()
    n = 2 if args.quick else args.runs
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
    ratio_line(
        "run_overhead",
        every_time_cpu_s=f"{seconds['every_time']:.3f}",
        shipped_cpu_s=f"{seconds['shipped']:.3f}",
        every_time_over_shipped=f"{seconds['every_time'] / seconds['shipped']:.2f}",
    )


if __name__ == "__main__":
    main()
