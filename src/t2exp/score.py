"""``python -m t2exp.score PREDICTIONS``: score any RAG system's outputs on T²-RAGBench.

PREDICTIONS is JSONL, JSON, CSV/TSV or parquet with at least ``id`` and ``prediction``
(optional ``subset``, ``context_id``, ``retrieved``); a run's ``predictions.jsonl`` and
``leaderboard.jsonl`` are valid input. ``--dataset`` is a ``conf/dataset`` option composed as
the app composes it (``bundled`` = the seeded ``limit`` sample a default run uses; ``--limit
none`` scores every question). The headline NM counts missing questions as wrong; see
:mod:`t2exp.scoring` for that decision and for how retrieval metrics are read. Errors print one
line to stderr and exit 2.

This module is also callable (``t2exp.score(...)`` is the Python API) because importing it
binds the name ``score`` on the package to this module.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

from t2exp.errors import T2ExpError


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m t2exp.score",
        description="Score predictions (id, prediction[, subset, context_id, retrieved]) against T²-RAGBench gold answers.",
    )
    p.add_argument("predictions", help="a .jsonl, .json, .csv, .tsv or .parquet file")
    p.add_argument("--dataset", default="bundled", help="a conf/dataset option (default: bundled)")
    p.add_argument("--dataset-path", help="directory of <Subset>_<split>.parquet|jsonl files, or one file (sets dataset.path)")
    p.add_argument("--question-splits", nargs="+", help="only questions of these splits (space or comma separated)")
    p.add_argument("--limit", type=_limit, default="config", help="questions per subset, or none for all (default: the dataset's)")
    p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override of the app config, e.g. seed=1")
    p.add_argument("--k", type=int, help="cut-off of MRR@k (default: the config's k, 3)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples for 95%% CIs; 0 = none (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0, as the app)")
    p.add_argument("--mlflow", action="store_true", help="log params and metrics as one MLflow run")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: the config's tracking.uri)")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from t2exp.scoring import compose_config, default_artifact_location, log_to_mlflow, score

        if args.bootstrap < 0:
            raise T2ExpError(f"--bootstrap {args.bootstrap}: must be 0 or more")
        splits = [s for item in args.question_splits or [] for s in item.split(",") if s] or None
        cfg = compose_config(args.dataset, dataset_path=args.dataset_path, question_splits=splits, limit=args.limit, overrides=args.override)
        k = int(args.k if args.k is not None else cfg.get("k", 3))
        result = score(args.predictions, config=cfg, k=k, n_boot=args.bootstrap, seed=args.seed)
        try:
            print(_render(result, args.format), flush=True)
        except BrokenPipeError:  # `| head`: stop quietly
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        if args.mlflow:
            uri = args.tracking_uri or str(cfg.tracking.uri)
            experiment = args.experiment or str(cfg.tracking.experiment)
            art = args.artifact_location or (default_artifact_location(uri) if args.tracking_uri else cfg.tracking.get("artifact_location"))
            try:
                run_id = log_to_mlflow(result, uri=uri, experiment=experiment, artifact_location=art, run_name=args.run_name)
            except T2ExpError:
                raise
            except Exception as exc:  # noqa: BLE001 - one line, not a traceback
                raise T2ExpError(f"--mlflow: cannot log to {uri} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
            print(f"t2exp.score: logged MLflow run {run_id} (experiment {experiment!r}) to {uri}", file=sys.stderr)
    except T2ExpError as exc:
        print(f"t2exp.score: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


class _CallableModule(types.ModuleType):
    """``import t2exp.score`` replaces the package's lazy ``score`` function with this module."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from t2exp.scoring import score

        return score(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
