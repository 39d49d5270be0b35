"""``t2exp explore SWEEP | RUN... | FILE...``: one self-contained HTML page of every question of a
sweep's cells, of runs, or of any system's predictions files, side by side
(:mod:`t2exp.evaluation.reporting.explore`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from t2exp.cli.compare import add_shared_args
from t2exp.errors import T2ExpError, command_error


def build_parser(prog: str = "t2exp explore") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="One HTML page (no network needed to view it) of every question of a sweep's cells, "
        "or of runs or predictions files, side by side: the headline with CIs and Δ vs the baseline, "
        "filters (cells disagree, every cell wrong, gold not retrieved), each cell's answer and retrieved ids.",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="a sweep's parent run id (or an experiment name); or run ids and predictions files "
        "(a run's predictions.jsonl, or any system's in the t2exp score format)",
    )
    p.add_argument(
        "--baseline",
        metavar="RUN|KEY=VALUE",
        help="the cell the others are compared with: for a sweep a run id (6+ characters) or overrides one cell has, "
        "e.g. 'rag_method=base'; else one of the SOURCEs as written (default: the first)",
    )
    p.add_argument("--metric", default="auto", help="nm | nm_bare | nm_strict | mrr_at_<k> | recall_at_<r> | auto (as t2exp compare)")
    p.add_argument(
        "--out", type=Path, metavar="FILE.html|DIR", help="where the page goes (default: outputs/reports/<sweep or name>/explore.html)"
    )
    add_shared_args(p, "bootstrap resamples and permutation sign patterns")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "t2exp explore") -> int:
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep stderr to our lines
    try:
        from t2exp.evaluation.reporting.explore import explore

        path = explore(
            args.sources,
            args.out,
            baseline=args.baseline,
            metric=args.metric,
            tracking_uri=args.tracking_uri,
            n_boot=args.n_boot,
            seed=args.seed,
        )
    except (T2ExpError, OSError) as exc:  # OSError: --out not writable, a full disk
        return command_error(prog, exc)
    print(f"explorer page: {path} (open it in a browser; everything it shows is inside the file)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
