"""``t2exp report TARGET``: paper-style tables and plots from a sweep's MLflow runs
(:func:`t2exp.evaluation.reporting.build.report`), or ``--errors RUN``: where one run's answers go wrong
(:mod:`t2exp.evaluation.diagnosis`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from t2exp.cli.compare import add_shared_args
from t2exp.errors import T2ExpError, command_error
from t2exp.infra.mlflow_store import open_client


def _errors(client: Callable[[], Any], source: str) -> int:
    """``--errors``: the error categories of one run (``client()`` only when ``source`` is a run id)."""
    from t2exp.evaluation.comparisons import load_source
    from t2exp.evaluation.diagnosis import breakdown, render
    from t2exp.evaluation.reporting.runs import ReportError

    rows = load_source(client, source)
    counts = breakdown(rows)
    if not sum(counts["all"].values()):
        raise ReportError(f"--errors {source}: no scored answers (a retrieval-only run, or no numeric gold)")
    print(render(counts, source))
    return 0


def build_parser(prog: str = "t2exp report") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Paper-style tables and plots from a sweep's MLflow runs.")
    p.add_argument("target", nargs="?", help="a sweep's parent run id, or an MLflow experiment name")
    p.add_argument(
        "--errors",
        metavar="RUN",
        help="instead of tables: where one run's answers go wrong (a run id or a predictions.jsonl path); t2exp.evaluation.diagnosis",
    )
    p.add_argument("--out", type=Path, help="output directory (default: outputs/reports/<target> in the current directory)")
    p.add_argument("--k", type=int, help="MRR@k of the Table 3 layout (default: the runs' k when they share one, else 3)")
    p.add_argument(
        "--tables",
        default="auto",
        help="auto (table3; + table4 for embedder sweeps; + readings for protocol sweeps) or a list: table3,table4,readings",
    )
    p.add_argument(
        "--baseline",
        metavar="RUN|KEY=VALUE",
        help="the row 'Δ vs' compares every other row with: a run id (6+ characters) or overrides one run has, "
        "e.g. 'rag_method=base' (default: the row with the best average)",
    )
    p.add_argument("--pairs", action="store_true", help="also compare every two rows (pairs.md|csv), Holm-corrected over all pairs")
    add_shared_args(p, "resamples / sign patterns for 'Δ vs'")
    p.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "t2exp report") -> int:
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep stderr to our lines
    from t2exp.evaluation.reporting.build import report
    from t2exp.evaluation.reporting.runs import ReportError

    try:
        if args.errors:
            return _errors(lambda: open_client(args.tracking_uri, "--tracking-uri", create=False), args.errors)
        if not args.target:
            raise ReportError("give a TARGET (a sweep's parent run id or an experiment name), or --errors RUN")
        result = report(
            args.target,
            args.out,
            tracking_uri=args.tracking_uri,
            k=args.k,
            tables=args.tables,
            n_boot=args.n_boot,
            seed=args.seed,
            log=not args.no_log,
            baseline=args.baseline,
            pairs=args.pairs,
        )
    except (T2ExpError, OSError) as exc:  # OSError: --out not writable, a full disk
        return command_error(prog, exc)
    print((result.out_dir / "report.md").read_text(encoding="utf-8"))
    print("files:\n" + "\n".join(f"  {f}" for f in result.files), file=sys.stderr)
    if result.logged_to:
        print(f"logged under report/ of MLflow run {result.logged_to}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
