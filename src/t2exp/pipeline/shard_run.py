"""What a shard of a sharded cell (``shards=N shard=i``; the app starts every shard of a cell as one
job of a sweep; :func:`t2exp.pipeline.cell.run_cell` runs it) keeps beside its answers: the cell's
config, a shard that finished before rejoining this attempt, and the merge
(:mod:`t2exp.pipeline.shard_merge`) when it finds every shard of this attempt done: the last shard
to finish is the one that merges, decided under the cell's lock, never by timing.

Each shard keeps its own predictions and resumes from them as an unsharded cell does; with
``resume=true`` a cell already FINISHED is skipped, and so is a shard that finished before (its
run joins this attempt's cell run), so a re-run answers only what a killed shard left.
"""

from __future__ import annotations

import json
import logging

from omegaconf import DictConfig, OmegaConf

from t2exp.config import to_dict
from t2exp.data.records import Subset
from t2exp.infra.cache import atomic_write_text, cell_lock
from t2exp.infra.redaction import redact_value
from t2exp.pipeline.shard_merge import merge_cell
from t2exp.pipeline.shards import POINTER_FILE, Layout
from t2exp.pipeline.steps import Components, Result
from t2exp.tracking import cell_run as runs

log = logging.getLogger("t2exp")


def cell_config(cfg: DictConfig) -> DictConfig:
    """The cell's config as its shards share it, resolved, with ``shard`` unset (the cell run logs this one)."""
    cell = OmegaConf.create(to_dict(cfg))
    cell.shard = None
    return cell


def record(cell_cfg: DictConfig, layout: Layout, i: int) -> None:
    """The cell's config (secrets redacted) beside its shards, and where the cell lives in this
    job's Hydra output directory: what ``t2exp collect`` reads."""
    plain = _redacted(OmegaConf.to_container(cell_cfg, resolve=True))
    text = OmegaConf.to_yaml(OmegaConf.create({k: v for k, v in plain.items() if k != "hydra"}))
    if not layout.config.is_file() or layout.config.read_text(encoding="utf-8") != text:
        atomic_write_text(layout.config, text)
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        out = HydraConfig.get().runtime.output_dir
        pointer = {"run_dir": str(layout.run_dir), "shards": layout.shards, "shard": i}
        atomic_write_text(f"{out}/{POINTER_FILE}", json.dumps(pointer))


def _redacted(node: object, key: str = "") -> dict:
    if isinstance(node, dict):
        return {k: _redacted(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_redacted(v, key) for v in node]  # type: ignore[return-value]
    return redact_value(key, node)


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
    return Result(metrics=dict(record["metrics"]), predictions_path=layout.predictions(i), skipped=True, run_id=run_id)


def merge_if_last(
    cell_cfg: DictConfig, overrides: list[str], layout: Layout, components: Components, key: str, cell_run_id: str
) -> Result | None:
    """Merge the cell when every shard of this attempt is done and nobody merged it yet."""
    with cell_lock(components.parts.services.lock_dir, f"cell-{key}"):
        waiting = [i for i in range(layout.shards) if not _joins(layout, i, cell_run_id, str(cell_cfg.tracking.uri))]
        if waiting:
            log.info(
                "shard done; the cell is merged when shards %s of %d have finished (or by `t2exp collect %s`)",
                ", ".join(map(str, waiting)),
                layout.shards,
                layout.run_dir,
            )
            return None
        if runs.is_finished(str(cell_cfg.tracking.uri), cell_run_id):
            return None  # another shard of this attempt merged it
        return merge_cell(cell_cfg, overrides, layout, components.parts.subsets, key, cell_run_id)


def _joins(layout: Layout, i: int, cell_run_id: str, uri: str) -> bool:
    """Shard ``i`` is done for this attempt's merge: done in this attempt, or in an earlier one
    that has ended (a shard re-run alone after a failed merge: the others need not run again)."""
    if not layout.done(i).is_file():
        return False
    earlier = layout.read_done(i).get("cell_run")
    return earlier == cell_run_id or not earlier or not runs.is_running(uri, str(earlier))
