"""From a composed Hydra config to a tracked cell, top to bottom: load (the data) → key (once) →
build (the components) → run the steps → log (its MLflow run, :mod:`t2exp.tracking.cell_log`),
under SIGTERM/SIGINT handling (:class:`t2exp.pipeline.stop.StopOnSignals`). A sharded cell's job
runs its shard the same way, as a child run, and merges the cell when it is the last to finish
(:mod:`t2exp.pipeline.shard_merge`)."""

from __future__ import annotations

import dataclasses
import logging

from omegaconf import DictConfig

from t2exp import config
from t2exp.errors import ConfigError
from t2exp.infra import progress
from t2exp.infra.cache import cell_lock
from t2exp.infra.mlflow_store import Tag
from t2exp.infra.redaction import redact_overrides
from t2exp.pipeline.build import build_components
from t2exp.pipeline.identity import Cell, load_cell
from t2exp.pipeline.predictions import PREDICTIONS_FILE
from t2exp.pipeline.shard_merge import merge_if_last, rejoin
from t2exp.pipeline.shards import Layout, shard_of, slice_subsets
from t2exp.pipeline.steps import Components, Result, run_steps
from t2exp.pipeline.stop import Interrupted, StopOnSignals
from t2exp.tracking import cell_run as runs
from t2exp.tracking.cell_log import cell_params, cell_tags, finished_metrics, recording, run_name
from t2exp.tracking.names import SEP

log = logging.getLogger("t2exp")


def run(cfg: DictConfig, overrides: list[str] | None = None) -> Result:
    """Validate, build, run and log one cell (or one shard of a sharded cell). Raises ``T2ExpError``
    on bad input and ``Interrupted`` on SIGTERM/SIGINT (the MLflow run is then closed as KILLED)."""
    config.check(cfg, overrides)
    progress.quiet_libraries(progress.hydra_verbose())
    with StopOnSignals() as signals:
        result = run_cell(cfg, overrides, signals)
        late = signals.stop.signal_name
        if late:  # the signal came after the last safe point: the run is complete and logged
            raise Interrupted(late, "the run had finished and its results are logged")
    return result


def run_cell(cfg: DictConfig, overrides: list[str] | None, signals: StopOnSignals) -> Result:
    """Load the cell and compute its key, build it, then run its shard ``cfg.shard`` of ``shards``
    (an unsharded cell is its one shard: its files, lock and MLflow run are the cell's) under the
    shard's lock, one process at a time: with ``resume=true`` the cell's FINISHED run's result, or
    a shard done before rejoins; else it is answered and logged. The last shard to finish merges
    the cell. The caches opened by the build are closed at the end."""
    cell = load_cell(cfg)
    components = build_components(cfg, signals.stop, cell)
    i, n = shard_of(cfg)
    layout = Layout(components.settings.run_dir, n)
    locks, subsets = components.parts.services.lock_dir, components.parts.subsets
    which = f"shard {i} of cell" if n > 1 else "cell"

    def waiting() -> None:
        log.warning("%s %s is being run by another process; waiting for it to end, then resuming from its predictions", which, cell.key)

    try:
        layout.record(cfg, i)
        with cell_lock(locks, layout.lock(cell.key, i), on_wait=waiting):
            finished = finished_cell(cfg, cell.key, components, mirror=i == 0)
            if finished is not None:
                return finished
            if n == 1:  # the cell's one shard: its run is the cell's
                return _answer(cfg, overrides, signals, cell, components, layout, i, None)
            cell_overrides = [o for o in overrides or [] if not o.lstrip("+~").startswith("shard=")]
            params, tags = cell_params({**cell.resolved, "shard": None}, subsets), cell_tags(cell.key, cell_overrides)
            parent = runs.open_cell_run(cfg.tracking, cell.key, n, run_name(cfg), tags, lock_dir=locks, params=params, subsets=subsets)
            result = rejoin(cfg, layout, i, parent, subsets) or _answer(cfg, overrides, signals, cell, components, layout, i, parent)
        return merge_if_last(cfg, cell_overrides, layout, components, cell.key, parent) or result
    finally:
        components.parts.services.close()


def _answer(
    cfg: DictConfig,
    overrides: list[str] | None,
    signals: StopOnSignals,
    cell: Cell,
    components: Components,
    layout: Layout,
    i: int,
    parent: str | None,
) -> Result:
    """Run shard ``i``'s questions as one MLflow run: the cell's own when unsharded, else a child
    of the cell run ``parent``, recorded done. A shard that fails or is stopped closes the cell run
    likewise (FAILED, KILLED), naming itself."""
    n = layout.shards
    if parent is None:
        return run_and_log(cfg, overrides, signals, cell, components)
    parts = dataclasses.replace(components.parts, subsets=slice_subsets(components.parts.subsets, i, n))
    done = {"shard": i, "shards": n, "cell_run": parent, "run_id": None, "metrics": {}, "prompts": {}, "spans": {}}
    if not any(s.questions for s in parts.subsets):  # more shards than questions: nothing to answer, nothing to log
        log.info("shard %d of %d: no question of this cell falls in its slice; nothing to answer", i, n)
        layout.write_done(i, done)
        return Result(metrics={}, predictions_path=layout.predictions(i))
    shard = Components(parts=parts, settings=dataclasses.replace(components.settings, run_dir=layout.dir(i)), stop=components.stop)
    tags = {Tag.SHARD: f"{i}/{n}", Tag.SHARD_OF: cell.key, Tag.OVERRIDES: " ".join(redact_overrides(list(overrides or [])))}
    try:
        result = run_and_log(cfg, overrides, signals, cell, shard, tags=tags, parent=parent, name=f"{run_name(cfg)}{SEP}shard {i}/{n}")
    except BaseException as exc:
        status, why = ("KILLED", f"interrupted by {exc}") if isinstance(exc, Interrupted) else ("FAILED", str(exc))
        try:
            runs.end_cell_run(str(cfg.tracking.uri), parent, status, f"shard {i} of {n}: {why}")
        except Exception as close_exc:  # the store is gone as well: the shard's own error is the one to read
            log.warning("the cell's MLflow run %s could not be closed: %s", parent, close_exc)
        raise
    layout.write_done(
        i, {**done, "run_id": result.run_id, "metrics": result.metrics, "prompts": parts.services.prompts.used, "spans": result.spans}
    )
    return result


def finished_cell(cfg: DictConfig, key: str, components: Components, *, mirror: bool = True) -> Result | None:
    """With ``resume=true``, the result of the cell's FINISHED MLflow run (``mirror``: listed under
    the current sweep as well), or None: the cell is to run."""
    metrics = finished_metrics(cfg, key, mirror=mirror)
    if metrics is None:
        return None
    return Result(metrics=metrics, predictions_path=components.settings.run_dir / PREDICTIONS_FILE)


def run_and_log(
    cfg: DictConfig,
    overrides: list[str] | None,
    signals: StopOnSignals,
    cell: Cell,
    components: Components,
    *,
    tags: dict[str, str] | None = None,
    parent: str | None = None,
    name: str | None = None,
) -> Result:
    """Run the cell's steps (or, with ``tags``/``parent``/``name``, one shard's) as one MLflow run, and log the result."""
    components.stop.check()
    parts = components.parts
    with recording(
        cfg,
        tags or cell_tags(cell.key, overrides),
        cell_params(cell.resolved, parts.subsets),
        parts.subsets,
        components.settings.run_dir,
        name=name,
        parent=parent,
        closing=signals.closing,
    ) as cell_log:
        parts.services.open()  # a damaged cache is the run's error, on its MLflow run
        result = run_steps(components, cell_log.question)
        cell_log.log(result, parts.services.prompts.used)
    return result


def objective_name(cfg: DictConfig) -> str:
    """The metric a run returns to a sweeper: ``objective``, else ``avg/nm`` with a generator and
    ``avg/mrr_at_<k>`` without one."""
    if cfg.get("objective"):
        return str(cfg.objective)
    return "avg/nm" if cfg.generator.get("_target_") else f"avg/mrr_at_{cfg.k}"


def objective_value(cfg: DictConfig, metrics: dict[str, float]) -> float | None:
    """The value of :func:`objective_name` in a run's metrics (a resumed cell's included)."""
    name = objective_name(cfg)
    if name in metrics:
        return float(metrics[name])
    if cfg.get("objective") is None:
        return None
    shown = ", ".join(sorted(m for m in metrics if "/" in m and not m.endswith(("_ci_low", "_ci_high")))[:8])
    raise ConfigError(f"objective={name} is invalid: this run logged no such metric; allowed: one it logs, e.g. {shown}")
