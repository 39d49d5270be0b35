"""From a composed Hydra config to a tracked cell, top to bottom: load (the data) → key (once) →
build (the components) → run the steps → log (its MLflow run, :mod:`t2exp.tracking.cell_log`),
under SIGTERM/SIGINT handling (:class:`t2exp.pipeline.stop.StopOnSignals`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from omegaconf import DictConfig

from t2exp import config
from t2exp.errors import ConfigError
from t2exp.infra import progress
from t2exp.infra.cache import cell_lock
from t2exp.pipeline.build import build_components
from t2exp.pipeline.identity import Cell, load_cell
from t2exp.pipeline.steps import Components, Result, run_steps
from t2exp.pipeline.stop import Interrupted, StopOnSignals
from t2exp.tracking.cell_log import cell_params, cell_run, cell_tags, finished_metrics

log = logging.getLogger("t2exp")


CellRunner = Callable[[DictConfig, "list[str] | None", StopOnSignals], Result]


def run(cfg: DictConfig, overrides: list[str] | None = None, runner: CellRunner | None = None) -> Result:
    """Validate, build, run and log one cell: the whole cell, or what ``runner`` runs under the
    same signal handling (the app passes :func:`t2exp.pipeline.shard_run.run_shard` for one shard
    of a sharded cell). Raises ``T2ExpError`` on bad input and ``Interrupted`` on SIGTERM/SIGINT
    (the MLflow run is then closed as KILLED)."""
    config.check(cfg, overrides)
    progress.quiet_libraries(progress.hydra_verbose())
    with StopOnSignals() as signals:
        result = (runner or run_cell)(cfg, overrides, signals)
        late = signals.stop.signal_name
        if late:  # the signal came after the last safe point: the run is complete and logged
            exc = Interrupted(late)
            exc.args = (f"interrupted by {late} after the run had finished; its results are logged",)
            raise exc
    return result


def run_cell(cfg: DictConfig, overrides: list[str] | None, signals: StopOnSignals) -> Result:
    """Load the cell and compute its key, build it, then (under the cell's lock: one process runs
    a cell at a time) return its FINISHED run's result or run and log it."""
    cell = load_cell(cfg)
    components = build_components(cfg, signals.stop, cell)

    def waiting() -> None:
        log.warning("cell %s is being run by another process; waiting for it to end, then resuming from its predictions", cell.key)

    with cell_lock(components.settings.cache_dir / "locks", f"cell-{cell.key}", on_wait=waiting):
        return finished_cell(cfg, cell.key, components) or run_and_log(cfg, overrides, signals, cell, components)


def finished_cell(cfg: DictConfig, key: str, components: Components, *, mirror: bool = True) -> Result | None:
    """With ``resume=true``, the result of the cell's FINISHED MLflow run (``mirror``: listed under
    the current sweep as well), or None: the cell is to run."""
    metrics = finished_metrics(cfg, key, mirror=mirror)
    if metrics is None:
        return None
    return Result(metrics=metrics, predictions_path=components.settings.run_dir / "predictions.jsonl", skipped=True)


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
    with cell_run(
        cfg,
        tags or cell_tags(cell.key, overrides),
        cell_params(cell.resolved, parts.subsets),
        parts.subsets,
        components.settings.run_dir,
        name=name,
        parent=parent,
        closing=signals.closing,
    ) as cell_log:
        result = run_steps(components)
        cell_log.log(result, parts.prompts.used)
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
