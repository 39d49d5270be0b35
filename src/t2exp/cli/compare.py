"""``t2exp compare RUN_A RUN_B``: two runs compared question by question
(:func:`t2exp.evaluation.paired.compare_runs`), printed as a table or JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from t2exp.errors import T2ExpError, one_line
from t2exp.evaluation.paired import compare_runs, format_table
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.infra.paths import default_tracking_uri


def build_parser(prog: str = "t2exp compare") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Paired comparison of two runs' per-question metrics.")
    p.add_argument("run_a", help="MLflow run id (or a predictions.jsonl path)")
    p.add_argument("run_b", help="MLflow run id (or a predictions.jsonl path)")
    p.add_argument(
        "--metric", default="auto",
        help="nm | nm_bare | nm_strict | mrr_at_<k> | recall_at_<r> | auto (default: nm if both runs have it, else MRR@k)",
    )
    p.add_argument("--n-boot", type=int, default=N_BOOT, help=f"bootstrap resamples and permutation sign patterns (default {N_BOOT})")
    p.add_argument("--seed", type=int, default=CI_SEED)
    p.add_argument(
        "--tracking-uri", default=default_tracking_uri(), help="MLflow tracking URI (default: mlruns/mlflow.db in the current directory)"
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "t2exp compare") -> int:
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep stderr to our lines
    try:
        result = compare_runs(args.run_a, args.run_b, args.metric, n_boot=args.n_boot, seed=args.seed, tracking_uri=args.tracking_uri)
    except T2ExpError as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    paired = result.paired
    if args.format == "json":
        print(json.dumps({"metric": result.metric, "a": args.run_a, "b": args.run_b, "paired": paired.n, "dropped": result.dropped,
                          "n_boot": args.n_boot, "seed": args.seed, "rows": [r.__dict__ for r in result.rows]}, indent=2))
        return 0
    print(f"A = {args.run_a}\nB = {args.run_b}")
    print(f"paired {paired.n} questions; dropped {paired.dropped} "
          f"({paired.only_a} only in A, {paired.only_b} only in B, {paired.missing_value} without a {result.metric} value)")
    print(format_table(result.rows, result.metric))
    return 0


if __name__ == "__main__":
    sys.exit(main())
