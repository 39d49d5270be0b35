"""A sharded cell's shards joined. With ``resume=true`` a shard that finished before rejoins this
attempt's cell run, so a re-run answers only what a killed shard left. The last shard to finish
(decided under the cell's lock, never by timing), or ``t2exp collect``, merges the cell: every
question once, in an unsharded run's order, scored and logged alike, so ``predictions.jsonl``,
``leaderboard.jsonl`` and ``metrics.json`` are byte for byte an unsharded run's."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from t2exp.config import to_dict
from t2exp.data.records import Subset
from t2exp.errors import T2ExpError
from t2exp.evaluation.scoring.cell_rows import score_cell
from t2exp.infra.cache import cell_lock, lock_name, locks_dir
from t2exp.pipeline.predictions import LEADERBOARD_FILE, PREDICTIONS_FILE, write_rows
from t2exp.pipeline.shards import Layout, cell_config, merged_counts, merged_rows
from t2exp.pipeline.steps import Components, Result
from t2exp.tracking import cell_run as runs
from t2exp.tracking.cell_log import cell_params, cell_tags, recording, run_name

log = logging.getLogger("t2exp")


def rejoin(cfg: DictConfig, layout: Layout, i: int, cell_run_id: str, subsets: list[Subset]) -> Result | None:
    """With ``resume=true``: a shard that finished before joins this attempt without answering
    again, unless its predictions lack some of its questions (then it answers those)."""
    if not cfg.get("resume") or not layout.done(i).is_file():
        return None
    record = layout.read_done(i)
    lacking = layout.lacking(i, subsets)
    if lacking:
        log.warning("resume: shard %d of %d: %s lacks %d questions; answering them", i, layout.shards, layout.predictions(i), lacking)
        return None
    run_id = record["run_id"]
    runs.adopt(str(cfg.tracking.uri), cell_run_id, {run_id: layout.done(i)} if run_id else {})
    layout.write_done(i, {**record, "cell_run": cell_run_id})
    log.info("resume: shard %d of %d already answered its questions (MLflow run %s); skipped", i, layout.shards, run_id)
    return Result(metrics=dict(record["metrics"]), predictions_path=layout.predictions(i), run_id=run_id)


def merge_if_last(
    cfg: DictConfig, overrides: list[str], layout: Layout, components: Components, key: str, cell_run_id: str
) -> Result | None:
    """Merge the cell when every shard of this attempt is done and nobody merged it yet."""
    uri = str(cfg.tracking.uri)
    with cell_lock(components.parts.services.lock_dir, lock_name("cell", key)):
        waiting = [i for i in range(layout.shards) if not _joins(layout, i, cell_run_id, uri)]
        if waiting:
            log.info(
                "the cell is merged when shards %s of %d have finished (or by `t2exp collect %s`)",
                ", ".join(map(str, waiting)),
                layout.shards,
                layout.run_dir,
            )
            return None
        if runs.is_finished(uri, cell_run_id):
            return None  # another shard of this attempt merged it
        return merge_cell(cell_config(cfg), overrides, layout, components.parts.subsets, key, cell_run_id)


def _joins(layout: Layout, i: int, cell_run_id: str, uri: str) -> bool:
    """Shard ``i`` is done for this attempt's merge: done in this attempt, or in an earlier one
    that has ended (a shard re-run alone after a failed merge: the others need not run again)."""
    if not layout.done(i).is_file():
        return False
    earlier = layout.read_done(i).get("cell_run")
    return earlier == cell_run_id or not earlier or not runs.is_running(uri, str(earlier))


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
            lock_dir=locks_dir(cfg.paths.cache),
            params=cell_params(to_dict(cfg), subsets),
            subsets=subsets,
            any_parent=True,
        )
    with recording(cfg, {}, {}, subsets, layout.run_dir, run_id=cell_run_id) as logged:
        records = [layout.read_done(i) for i in range(layout.shards)]
        predictions = layout.run_dir / PREDICTIONS_FILE
        write_rows(rows, predictions, layout.run_dir / LEADERBOARD_FILE)
        metrics, table = score_cell(rows, subsets, int(cfg.k))
        metrics.update(merged_counts([{k: v for k, v in r["metrics"].items() if k not in metrics} for r in records]))
        spans = {q: s for r in records for q, s in (r.get("spans") or {}).items()}
        result = Result(metrics=metrics, predictions_path=predictions, rows=rows, table=table, spans=spans)
        runs.adopt(uri, cell_run_id, {str(r["run_id"]): layout.done(i) for i, r in enumerate(records) if r.get("run_id")})
        logged.log(result, {name: text for r in records for name, text in (r.get("prompts") or {}).items()})
    runs.close_stale(uri, str(logged.tracker.experiment_id), key, layout.shards, keep=cell_run_id)
    log.info("merged %d shards of cell %s: %d questions", layout.shards, key, len(rows))
    return result
