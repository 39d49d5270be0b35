"""The merge of a sharded cell: its shards' predictions joined (every question exactly once, in the
question order an unsharded run writes), scored through the one scorer and logged as the cell's
MLflow run — the same files and the same logging as an unsharded run of the cell, so
``predictions.jsonl``, ``leaderboard.jsonl`` and ``metrics.json`` are byte for byte an unsharded
run's. Run by the last shard to finish, or by ``t2exp collect``."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from t2exp.config import to_dict
from t2exp.data.records import Subset
from t2exp.errors import T2ExpError
from t2exp.evaluation.scoring.cell_rows import score_cell
from t2exp.pipeline.predictions import write_rows
from t2exp.pipeline.shards import Layout, merged_counts, merged_rows
from t2exp.pipeline.steps import Result
from t2exp.tracking import cell_run as runs
from t2exp.tracking.cell_log import cell_params, cell_tags, recording, run_name

log = logging.getLogger("t2exp")


def merge_cell(cfg: DictConfig, overrides: list[str], layout: Layout, subsets: list[Subset], key: str, cell_run_id: str | None) -> Result:
    """Join, check, score and log the cell (``cell_run_id``: this attempt's; None: the RUNNING one
    ``t2exp collect`` finds, or a new one). Raises ``DataError`` naming the shard file when a
    question is missing or duplicated; the cell run is then closed FAILED with that line."""
    uri = str(cfg.tracking.uri)
    try:
        rows = merged_rows(layout, subsets)  # refuses before anything is written
    except T2ExpError as exc:
        if cell_run_id is not None:
            runs.end_cell_run(uri, cell_run_id, "FAILED", str(exc))
        raise
    if cell_run_id is None:
        cell_run_id = runs.open_cell_run(
            cfg.tracking,
            key,
            layout.shards,
            run_name(cfg),
            cell_tags(key, overrides),
            lock_dir=Path(cfg.paths.cache) / "locks",
            params=cell_params(to_dict(cfg), subsets),
            subsets=subsets,
            any_parent=True,
        )
    with recording(cfg, {}, {}, subsets, layout.run_dir, run_id=cell_run_id) as logged:
        records = [layout.read_done(i) for i in range(layout.shards)]
        predictions = layout.run_dir / "predictions.jsonl"
        write_rows(rows, predictions, layout.run_dir / "leaderboard.jsonl")
        metrics, table = score_cell(rows, subsets, int(cfg.k))
        metrics.update(merged_counts([{k: v for k, v in r["metrics"].items() if k not in metrics} for r in records]))
        spans = {q: s for r in records for q, s in (r.get("spans") or {}).items()}
        result = Result(metrics=metrics, predictions_path=predictions, table=table, spans=spans)
        runs.adopt(uri, cell_run_id, {str(r["run_id"]): layout.done(i) for i, r in enumerate(records) if r.get("run_id")})
        logged.log(result, {name: text for r in records for name, text in (r.get("prompts") or {}).items()})
    runs.close_stale(uri, str(logged.tracker.experiment_id), key, layout.shards, keep=cell_run_id)
    log.info("merged %d shards of cell %s: %d questions", layout.shards, key, len(rows))
    return result
