"""The merge of a sharded cell: its shards' predictions joined (every question exactly once, in the
question order an unsharded run writes), scored through the one scorer and logged as the cell's
MLflow run — the same files and the same logging as an unsharded run of the cell, so
``predictions.jsonl``, ``leaderboard.jsonl`` and ``metrics.json`` are byte for byte an unsharded
run's. Run by the last shard to finish, or by ``t2exp collect``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig

from t2exp.answering.prompts import PromptLibrary
from t2exp.config.generators import GeneratorConfig
from t2exp.data.records import Subset
from t2exp.errors import T2ExpError
from t2exp.generators import Sampling
from t2exp.infra.mlflow_store import Tag
from t2exp.pipeline.predictions import write_leaderboard, write_predictions
from t2exp.pipeline.shards import Layout, merged_counts, merged_rows
from t2exp.pipeline.steps import Components, Parts, Result, Settings, _score
from t2exp.tracking import cell_run as runs
from t2exp.tracking.cell_log import CellLog, cell_params, cell_tags, run_name
from t2exp.tracking.mlflow_run import Tracker

log = logging.getLogger("t2exp")


def merge_view(cfg: DictConfig, subsets: list[Subset], run_dir: Path) -> Components:
    """What scoring and logging a cell read: its data, ``k`` and run directory (no model is built)."""
    parts = Parts(
        subsets=subsets, method=cast(Any, None), embedder=None, store_factory=None, generator=None, prompts=PromptLibrary(cfg.paths.prompts)
    )
    settings = Settings(
        sampling=Sampling(),
        answer_mode=str(cfg.generator.get("answer_mode", GeneratorConfig.answer_mode)),
        k=int(cfg.k),
        variant=str(cfg.document.variant),
        cache_dir=Path(cfg.paths.cache),
        run_dir=run_dir,
    )
    return Components(parts=parts, settings=settings)


def merge_cell(cfg: DictConfig, overrides: list[str], layout: Layout, subsets: list[Subset], key: str, cell_run: str | None) -> Result:
    """Join, check, score and log the cell (``cell_run``: this attempt's; None: the RUNNING one
    ``t2exp collect`` finds, or a new one). Raises ``DataError`` naming the shard file when a
    question is missing or duplicated; the cell run is then closed FAILED with that line."""
    uri = str(cfg.tracking.uri)
    try:
        rows = merged_rows(layout, subsets)  # refuses before anything is written
    except T2ExpError as exc:
        if cell_run is not None:
            runs.end_cell_run(uri, cell_run, "FAILED", str(exc))
        raise
    c = merge_view(cfg, subsets, layout.run_dir)
    if cell_run is None:
        cell_run = runs.open_cell_run(
            cfg.tracking,
            key,
            layout.shards,
            run_name(cfg),
            cell_tags(key, overrides),
            lock_dir=c.settings.cache_dir / "locks",
            params=cell_params(_plain(cfg), subsets),
            subsets=subsets,
            any_parent=True,
        )
    tracker = Tracker.attach(uri, cell_run)
    logged = CellLog(tracker, cfg, subsets, layout.run_dir)
    status = "FAILED"
    try:
        records = [layout.read_done(i) for i in range(layout.shards)]
        for r in records:
            c.parts.prompts.used.update(r.get("prompts") or {})
        predictions = layout.run_dir / "predictions.jsonl"
        write_predictions(rows, predictions)
        write_leaderboard(rows, layout.run_dir / "leaderboard.jsonl")
        metrics, table = _score(rows, c)
        metrics.update(merged_counts([{k: v for k, v in r["metrics"].items() if k not in metrics} for r in records]))
        spans = {q: s for r in records for q, s in (r.get("spans") or {}).items()}
        result = Result(metrics=metrics, predictions_path=predictions, table=table, spans=spans, run_id=cell_run)
        runs.adopt(uri, cell_run, {str(r["run_id"]): layout.done(i) for i, r in enumerate(records) if r.get("run_id")})
        logged.record(result, c.parts.prompts.used)
        status = "FINISHED"
    except T2ExpError as exc:
        tracker.set_tags({Tag.ERROR: str(exc)})
        raise
    finally:
        tracker.finish(status)
    runs.close_stale(uri, str(tracker.experiment_id), key, layout.shards, keep=cell_run)
    log.info("merged %d shards of cell %s: %d questions", layout.shards, key, len(rows))
    logged.print_summary(result)
    return result


def _plain(cfg: DictConfig) -> dict[str, Any]:
    from t2exp.pipeline.build import to_dict

    return to_dict(cfg)
