"""``t2exp compare A B``: two runs compared question by question, then the questions they differ
on; ``t2exp compare SWEEP --baseline SPEC``: every cell of a sweep against one
(:func:`t2exp.evaluation.comparisons.compare`), printed as tables or JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from t2exp.errors import T2ExpError, command_error
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.infra.mlflow_store import move_login
from t2exp.infra.paths import default_tracking_uri

if TYPE_CHECKING:  # the parser answers --help before the comparison engine (pandas, MLflow) is imported
    from t2exp.evaluation.comparisons import SweepComparison
    from t2exp.evaluation.paired import Comparison

SHOW = 20  # questions listed by default


def _show(text: str) -> int | None:
    """``--show``: a count (0: none) or ``all`` (None: no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"--show {text!r}: give a number of questions (0: none) or 'all'")
    return n


def build_parser(prog: str = "t2exp compare") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Paired comparison of two runs' per-question metrics, and the "
        "questions they differ on; or every cell of a sweep against a baseline cell.",
    )
    p.add_argument(
        "run_a",
        help="MLflow run id, a run's predictions.jsonl, or any system's predictions in the t2exp score format "
        "(scored against the bundled data); with --baseline: a sweep's parent run id",
    )
    p.add_argument("run_b", nargs="?", help="as run_a: a run id or a predictions file (not with --baseline)")
    p.add_argument(
        "--baseline",
        metavar="RUN|KEY=VALUE",
        help="compare every cell of the sweep RUN_A with this one: a run id (6+ characters) or overrides "
        "one cell has, e.g. 'rag_method=base'; p-values Holm-corrected over the cells",
    )
    p.add_argument(
        "--metric",
        default="auto",
        help="nm | nm_bare | nm_strict | mrr_at_<k> | recall_at_<r> | auto (default: nm if both runs have it, else MRR@k)",
    )
    p.add_argument(
        "--show",
        type=_show,
        default=SHOW,
        metavar="N|all",
        help=f"list the first N questions that differ, largest effect first (default {SHOW}; 0: none; all)",
    )
    p.add_argument(
        "--subset",
        action="append",
        metavar="NAME[,NAME]",
        help="compare only the questions of these subsets, e.g. FinQA (repeat it or give a comma list; default: every subset)",
    )
    p.add_argument("--out", type=Path, metavar="FILE.csv|FILE.jsonl", help="write every question that differs to this file")
    add_shared_args(p, "bootstrap resamples and permutation sign patterns")
    p.add_argument("--format", choices=("table", "json"), default="table")
    return p


def add_shared_args(p: argparse.ArgumentParser, n_boot_help: str) -> None:
    """The options ``t2exp compare`` and ``t2exp report`` share: the paired statistics' resamples and seed, the store."""
    p.add_argument("--n-boot", type=int, default=N_BOOT, help=f"{n_boot_help} (default {N_BOOT})")
    p.add_argument("--seed", type=int, default=CI_SEED)
    p.add_argument(
        "--tracking-uri",
        type=move_login,
        default=default_tracking_uri(),
        help="MLflow tracking URI (default: mlruns/mlflow.db in the current directory)",
    )


def _print_questions(c: Comparison, show: int | None) -> None:
    """How many questions differ (A's wins, its losses, the ties), then the first ``show`` of them."""
    from t2exp.evaluation.listing import render_questions
    from t2exp.evaluation.metrics import metric_label

    print(
        f"questions that differ on {metric_label(c.metric)}: {len(c.questions)} of {c.paired.n} "
        f"(A better on {c.wins}, B better on {c.losses}, the same on {c.ties})"
    )
    listing = render_questions(c.questions, c.metric, show)
    if listing:
        print(listing)


def _print_pair(result: Comparison, args: argparse.Namespace) -> None:
    from t2exp.evaluation.comparisons import format_table

    paired = result.paired
    print(f"A = {args.run_a}\nB = {args.run_b}")
    print(
        f"paired {paired.n} questions; dropped {paired.dropped} "
        f"({paired.only_a} only in A, {paired.only_b} only in B, {paired.missing_value} without a {result.metric} value)"
    )
    print(format_table(result.rows, result.metric) + "\n")
    _print_questions(result, args.show)


def _print_sweep(result: SweepComparison, args: argparse.Namespace) -> None:
    from t2exp.evaluation.comparisons import format_sweep_table

    print(f"sweep: {result.title}")
    print(format_sweep_table(result))
    for c in result.cells:
        print(f"\nA = {c.run.name} (run {c.run.run_id}), B = the baseline")
        _print_questions(c.comparison, args.show)


def _run(args: argparse.Namespace) -> None:
    from t2exp.evaluation.comparisons import SweepComparison, compare
    from t2exp.evaluation.listing import check_out, write_records

    check_out(args.out)  # before any work
    subsets = [s for item in args.subset or [] for s in item.split(",") if s]
    result = compare(
        args.run_a,
        args.run_b,
        args.metric,
        baseline=args.baseline,
        n_boot=args.n_boot,
        seed=args.seed,
        tracking_uri=args.tracking_uri,
        subsets=subsets,
    )
    if args.out is not None:
        write_records(args.out, result.records(), result.first_columns)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.format == "json":
        named = {} if isinstance(result, SweepComparison) else {"a": args.run_a, "b": args.run_b}
        print(json.dumps({**named, **result.to_dict(), "n_boot": args.n_boot, "seed": args.seed}, indent=2, default=str))
    elif isinstance(result, SweepComparison):
        _print_sweep(result, args)
    else:
        _print_pair(result, args)
    if args.out is not None:
        print(f"every question that differs: {args.out}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, prog: str = "t2exp compare") -> int:
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep stderr to our lines
    try:
        _run(args)
    except (T2ExpError, OSError) as exc:  # OSError: --out not writable, a full disk
        return command_error(prog, exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
