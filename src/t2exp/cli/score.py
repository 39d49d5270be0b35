"""``t2exp score PREDICTIONS``: score any RAG system's outputs on T²-RAGBench
(:func:`t2exp.evaluation.score` is the Python API).

PREDICTIONS is JSONL, JSON, CSV/TSV or parquet with at least ``id`` and ``prediction``
(optional ``subset``, ``context_id``, ``retrieved``); a run's ``predictions.jsonl`` and
``leaderboard.jsonl`` are valid input. ``--dataset`` is a ``conf/dataset`` option composed as
the app composes it (``bundled`` = the seeded ``limit`` sample a default run uses; ``--limit
none`` scores every question). The headline NM counts missing questions as wrong; see
:mod:`t2exp.evaluation.scoring.compute` for that decision and for how retrieval metrics are read.
Errors print one line to stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from t2exp.errors import T2ExpError, command_error, one_line
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.infra.mlflow_store import Tag, move_login
from t2exp.infra.sqlite_store import sqlite_path

if TYPE_CHECKING:  # the parser answers --help before the scorer (pandas, Hydra, MLflow) is imported
    from t2exp.evaluation.scoring.result import ScoreResult


def _limit(value: str) -> int | None | str:
    if value == "config":  # the dataset option's own limit
        return value
    if value.lower() in ("none", "null", "all"):
        return None
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: a number of questions per subset, or none") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: must be at least 1 (or none)")
    return n


def build_parser(prog: str = "t2exp score") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Score predictions (id, prediction[, subset, context_id, retrieved]) against T²-RAGBench gold answers.",
    )
    p.add_argument("predictions", help="a .jsonl, .json, .csv, .tsv or .parquet file")
    p.add_argument("--dataset", default="bundled", help="a conf/dataset option (default: bundled)")
    p.add_argument("--dataset-path", help="directory of <Subset>_<split>.parquet|jsonl files, or one file (sets dataset.path)")
    p.add_argument("--question-splits", nargs="+", help="only questions of these splits (space or comma separated)")
    p.add_argument("--limit", type=_limit, default="config", help="questions per subset, or none for all (default: the dataset's)")
    p.add_argument(
        "--override", "-o", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override of the app config, e.g. seed=1"
    )
    p.add_argument("--k", type=int, help="cut-off of MRR@k (default: the config's k, 3)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument(
        "--bootstrap", type=int, default=N_BOOT, metavar="N", help=f"bootstrap resamples for 95%% CIs; 0 = none (default {N_BOOT})"
    )
    p.add_argument("--seed", type=int, default=CI_SEED, help=f"bootstrap seed (default {CI_SEED}, as the app)")
    p.add_argument("--mlflow", action="store_true", help="log params and metrics as one MLflow run")
    p.add_argument("--tracking-uri", type=move_login, help="MLflow tracking URI (default: the config's tracking.uri)")
    p.add_argument("--experiment", help="MLflow experiment (default: the config's tracking.experiment)")
    p.add_argument("--artifact-location", help="artifact root for a new experiment (default: next to a sqlite DB)")
    p.add_argument("--run-name", help="MLflow run name (default: score-<file name>)")
    return p


def _render(result: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, default=str)
    if fmt == "csv":
        return result.to_frame().to_csv().rstrip("\n")
    return str(result)


def main(argv: Sequence[str] | None = None, prog: str = "t2exp score") -> int:
    args = build_parser(prog).parse_args(argv)
    from t2exp.config.schema import Config
    from t2exp.evaluation.scoring.compute import score
    from t2exp.evaluation.scoring.gold import compose_config

    try:
        if args.bootstrap < 0:
            raise T2ExpError(f"--bootstrap {args.bootstrap}: must be 0 or more")
        splits = [s for item in args.question_splits or [] for s in item.split(",") if s] or None
        cfg = compose_config(
            args.dataset, dataset_path=args.dataset_path, question_splits=splits, limit=args.limit, overrides=args.override
        )
        k = int(args.k if args.k is not None else cfg.get("k", Config.k))
        result = score(args.predictions, config=cfg, k=k, n_boot=args.bootstrap, seed=args.seed)
        try:
            print(_render(result, args.format), flush=True)
        except BrokenPipeError:  # `| head`: stop quietly
            sys.stdout = open(os.devnull, "w")  # stays open until exit
        if args.mlflow:
            uri = args.tracking_uri or str(cfg.tracking.uri)
            experiment = args.experiment or str(cfg.tracking.experiment)
            art = args.artifact_location or (default_artifact_location(uri) if args.tracking_uri else cfg.tracking.get("artifact_location"))
            try:
                run_id = log_to_mlflow(result, uri=uri, experiment=experiment, artifact_location=art, run_name=args.run_name)
            except T2ExpError:
                raise
            except Exception as exc:  # one line, not a traceback
                raise T2ExpError(f"--mlflow: cannot log to {uri} ({type(exc).__name__}: {one_line(exc, 200)})") from None
            print(f"{prog}: logged MLflow run {run_id} (experiment {experiment!r}) to {uri}", file=sys.stderr)
    except T2ExpError as exc:
        return command_error(prog, exc)
    return 0


def default_artifact_location(uri: str) -> str | None:
    """Artifacts next to a sqlite tracking DB (``<db dir>/artifacts``); the server decides otherwise."""
    db = sqlite_path(uri)
    return str(db.parent / "artifacts") if db else None


def log_to_mlflow(
    result: ScoreResult, *, uri: str, experiment: str, artifact_location: str | None = None, run_name: str | None = None
) -> str:
    """Log params, metrics (the app's names plus the counts), ``score.json`` and each scored
    question as a row of ``predictions.jsonl`` (as a cell logs it: ``t2exp compare`` reads it) as one run; its id."""
    from t2exp.tracking.mlflow_run import Tracker

    name = run_name or f"score-{Path(result.source).stem or 'predictions'}"
    tags = {Tag.KIND: "score", Tag.PREDICTIONS: result.source}
    tracker = Tracker(uri, experiment, artifact_location or default_artifact_location(uri), name, tags)
    status = "FAILED"
    try:
        tracker.log_params(result.params)
        tracker.log_metrics(result.metrics)
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "score.json"
            p.write_text(json.dumps(result.to_dict(), indent=2, default=str), encoding="utf-8")
            tracker.log_artifact(p)
            rows = Path(tmp) / "predictions.jsonl"
            rows.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in result.questions), encoding="utf-8")
            tracker.log_artifact(rows)
        status = "FINISHED"
    finally:
        tracker.finish(status)
    return tracker.run_id
