"""One shard of a sharded cell (``shards=N shard=i``; the app starts every shard of a cell as one
job of a sweep): it answers its slice of the questions (:mod:`t2exp.pipeline.shards`) as a child
run of the cell's MLflow run, records itself as done, and when it finds every shard of this
attempt done it merges the cell (:mod:`t2exp.pipeline.shard_merge`): the last shard to finish is
the one that merges, decided under the cell's lock, never by timing.

Each shard keeps its own predictions and resumes from them as an unsharded cell does; with
``resume=true`` a cell already FINISHED is skipped, and so is a shard that finished before (its
run joins this attempt's cell run), so a re-run answers only what a killed shard left.
"""

from __future__ import annotations

import dataclasses
import json
import logging

from omegaconf import DictConfig, OmegaConf

from t2exp.config import to_dict
from t2exp.data.records import Subset
from t2exp.infra.cache import atomic_write_text, cell_lock
from t2exp.infra.mlflow_store import Tag
from t2exp.infra.redaction import redact_overrides, redact_value
from t2exp.pipeline.build import build_components
from t2exp.pipeline.cell import finished_cell, run_and_log
from t2exp.pipeline.identity import Cell, load_cell
from t2exp.pipeline.shard_merge import merge_cell
from t2exp.pipeline.shards import POINTER_FILE, Layout, shard_of, slice_subsets
from t2exp.pipeline.steps import Components, Result
from t2exp.pipeline.stop import Interrupted, StopOnSignals
from t2exp.tracking import cell_run as runs
from t2exp.tracking.cell_log import cell_params, cell_tags, run_name

log = logging.getLogger("t2exp")


def cell_config(cfg: DictConfig) -> DictConfig:
    """The cell's config as its shards share it, resolved, with ``shard`` unset (the cell run logs this one)."""
    cell = OmegaConf.create(to_dict(cfg))
    cell.shard = None
    return cell


def run_shard(cfg: DictConfig, overrides: list[str] | None, signals: StopOnSignals) -> Result:
    """Answer shard ``cfg.shard`` of the cell, then merge the cell when every shard is done."""
    i, n = shard_of(cfg)
    cell = load_cell(cfg)
    components = build_components(cfg, signals.stop, cell)
    key = cell.key
    layout = Layout(components.settings.run_dir, n)
    cell_cfg = cell_config(cfg)
    _record(cell_cfg, layout, i)
    skipped = finished_cell(cfg, key, components, mirror=i == 0)
    if skipped is not None:
        return skipped
    cell_overrides = [o for o in overrides or [] if not o.lstrip("+~").startswith("shard=")]
    locks = components.settings.cache_dir / "locks"
    cell_run = runs.open_cell_run(
        cfg.tracking,
        key,
        n,
        run_name(cfg),
        cell_tags(key, cell_overrides),
        lock_dir=locks,
        params=cell_params({**cell.resolved, "shard": None}, components.parts.subsets),
        subsets=components.parts.subsets,
    )

    def waiting() -> None:
        log.warning("shard %d of cell %s is being run by another process; waiting for it to end, then resuming", i, key)

    with cell_lock(locks, f"cell-{key}-shard-{i}-of-{n}", on_wait=waiting):
        result = _rejoin(cfg, layout, i, cell_run, components.parts.subsets)
        result = result or _answer(cfg, overrides, signals, cell, components, layout, i, cell_run)
    merged = _merge_if_last(cell_cfg, cell_overrides, layout, components, key, cell_run)
    return merged or result


def _record(cell_cfg: DictConfig, layout: Layout, i: int) -> None:
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


def _rejoin(cfg: DictConfig, layout: Layout, i: int, cell_run: str, subsets: list[Subset]) -> Result | None:
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
    runs.adopt(str(cfg.tracking.uri), cell_run, {run_id: layout.done(i)} if run_id else {})
    layout.write_done(i, {**record, "cell_run": cell_run})
    log.info("resume: shard %d of %d already answered its questions (MLflow run %s); skipped", i, layout.shards, run_id)
    return Result(metrics=dict(record["metrics"]), predictions_path=layout.predictions(i), skipped=True, run_id=run_id)


def _answer(
    cfg: DictConfig,
    overrides: list[str] | None,
    signals: StopOnSignals,
    cell: Cell,
    components: Components,
    layout: Layout,
    i: int,
    cell_run: str,
) -> Result:
    """Run the shard's questions as a child run of the cell run; record it done. A shard that
    fails or is stopped closes the cell run likewise (FAILED, KILLED), naming itself."""
    n = layout.shards
    parts = dataclasses.replace(components.parts, subsets=slice_subsets(components.parts.subsets, i, n))
    if not any(s.questions for s in parts.subsets):  # more shards than questions: nothing to answer, nothing to log
        log.info("shard %d of %d: no question of this cell falls in its slice; nothing to answer", i, n)
        layout.write_done(i, {"shard": i, "shards": n, "run_id": None, "cell_run": cell_run, "metrics": {}, "prompts": {}, "spans": {}})
        return Result(metrics={}, predictions_path=layout.predictions(i), skipped=True)
    shard = Components(parts=parts, settings=dataclasses.replace(components.settings, run_dir=layout.dir(i)), stop=components.stop)
    tags = {Tag.SHARD: f"{i}/{n}", Tag.SHARD_OF: cell.key, Tag.OVERRIDES: " ".join(redact_overrides(list(overrides or [])))}
    try:
        result = run_and_log(cfg, overrides, signals, cell, shard, tags=tags, parent=cell_run, name=f"{run_name(cfg)}-shard{i}of{n}")
    except BaseException as exc:
        status = "KILLED" if isinstance(exc, Interrupted) else "FAILED"
        try:
            runs.end_cell_run(str(cfg.tracking.uri), cell_run, status, f"shard {i} of {n}: {exc}")
        except Exception as close_exc:  # the store is gone as well: the shard's own error is the one to read
            log.warning("the cell's MLflow run %s could not be closed: %s", cell_run, close_exc)
        raise
    layout.write_done(
        i,
        {
            "shard": i,
            "shards": n,
            "run_id": result.run_id,
            "cell_run": cell_run,
            "metrics": result.metrics,
            "prompts": shard.parts.prompts.used,
            "spans": result.spans,
        },
    )
    return result


def _merge_if_last(
    cell_cfg: DictConfig, overrides: list[str], layout: Layout, components: Components, key: str, cell_run: str
) -> Result | None:
    """Merge the cell when every shard of this attempt is done and nobody merged it yet."""
    with cell_lock(components.settings.cache_dir / "locks", f"cell-{key}"):
        waiting = [i for i in range(layout.shards) if not _joins(layout, i, cell_run, str(cell_cfg.tracking.uri))]
        if waiting:
            log.info(
                "shard done; the cell is merged when shards %s of %d have finished (or by `t2exp collect %s`)",
                ", ".join(map(str, waiting)),
                layout.shards,
                layout.run_dir,
            )
            return None
        if runs.is_finished(str(cell_cfg.tracking.uri), cell_run):
            return None  # another shard of this attempt merged it
        return merge_cell(cell_cfg, overrides, layout, components.parts.subsets, key, cell_run)


def _joins(layout: Layout, i: int, cell_run: str, uri: str) -> bool:
    """Shard ``i`` is done for this attempt's merge: done in this attempt, or in an earlier one
    that has ended (a shard re-run alone after a failed merge: the others need not run again)."""
    if not layout.done(i).is_file():
        return False
    earlier = layout.read_done(i).get("cell_run")
    return earlier == cell_run or not earlier or not runs.is_running(uri, str(earlier))
