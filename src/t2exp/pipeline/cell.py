"""From a composed Hydra config to a tracked experiment run."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t2exp import config
from t2exp.config.schema import TrackingConfig
from t2exp.errors import ConfigError, T2ExpError, TrackingError
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import headline_metrics, metric_label
from t2exp.infra import progress
from t2exp.infra.cache import atomic_write_text, cell_lock, read_jsonl
from t2exp.infra.redaction import env_secrets, redact_overrides, redact_text
from t2exp.infra.signals import handle_stop_signals
from t2exp.pipeline.build import build_components, to_dict
from t2exp.pipeline.identity import cell_key, data_fingerprint, without_meta
from t2exp.pipeline.steps import Components, Result, run_steps
from t2exp.pipeline.stop import Interrupted, StopRequest
from t2exp.tracking.inspection import TABLE_FILE, description, predictions_table
from t2exp.tracking.mlflow_run import PARENT_ENV, Tracker, finished_run_for, flatten, mirror_into_sweep
from t2exp.tracking.names import cell_name
from t2exp.tracking.summary import results_markdown, results_table, run_footer

log = logging.getLogger("t2exp")

# seconds between the first SIGTERM/SIGINT (finish the requests in flight, write their
# predictions, stop) and the hard stop; a second signal stops at once
STOP_GRACE_ENV = "T2EXP_STOP_GRACE_SECONDS"
DEFAULT_STOP_GRACE = 5.0


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


def _run_name(cfg: DictConfig) -> str:
    """``bm25f · minilm · k=3``: short enough for the MLflow runs table; a sweep's end adds the
    keys its cells differ in (:func:`t2exp.tracking.names.name_sweep_cells`)."""
    return cell_name(str(cfg.rag_method.name), str(cfg.embedder.name), str(cfg.k))


def _stop_grace() -> float:
    try:
        return max(0.0, float(os.environ.get(STOP_GRACE_ENV, DEFAULT_STOP_GRACE)))
    except ValueError:
        return DEFAULT_STOP_GRACE


def _install_signal_handlers(stop: StopRequest) -> Callable[[], None]:
    """SIGTERM/SIGINT: the first asks the experiment to stop at its next safe point (after the
    predictions in flight are written and their LLM answers cached) and arms a timer; a second
    signal, or the timer after ``$T2EXP_STOP_GRACE_SECONDS`` (default 5), raises ``Interrupted``
    at once. Returns a function that restores the previous handlers."""
    grace = _stop_grace()
    state: dict[str, Any] = {"closing": False, "timer": None}

    def handler(signum, frame):
        name = signal.Signals(signum).name
        if state["closing"]:  # closing the MLflow run: finish that first
            log.warning("%s received while closing the run; exiting when done", name)
            stop.request(name)
            return
        if stop.is_set() or grace <= 0:
            if stop.defer_stop_now(name):  # inside an atomic block: raised at its end
                return
            raise Interrupted(name)
        stop.request(name)
        log.warning("%s: stopping after the requests in flight (at most %.0fs; send %s again to stop now)", name, grace, name)
        timer = threading.Timer(grace, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        state["timer"] = timer

    put_back = handle_stop_signals(handler)  # not off the main thread: a restore that does nothing then

    def closing() -> None:
        state["closing"] = True

    def restore() -> None:
        if state["timer"] is not None:
            state["timer"].cancel()
        put_back()

    restore.closing = closing  # type: ignore[attr-defined]
    return restore


CellRunner = Callable[[DictConfig, "list[str] | None", Callable[[], None], StopRequest], Result]


def run(cfg: DictConfig, overrides: list[str] | None = None, runner: CellRunner | None = None) -> Result:
    """Validate, build, run and log one experiment: the whole cell, or what ``runner`` runs under
    the same signal handling (the app passes :func:`t2exp.pipeline.shard_run.run_shard` for one
    shard of a sharded cell). Raises ``T2ExpError`` on bad input and ``Interrupted`` on
    SIGTERM/SIGINT (the MLflow run is then closed as KILLED)."""
    config.check(cfg, overrides)
    progress.quiet_libraries(progress.hydra_verbose())
    stop = StopRequest()
    restore = _install_signal_handlers(stop)
    try:
        result = (runner or _run)(cfg, overrides, restore, stop)
        signal_name = stop.signal_name
        if signal_name:  # the signal came after the last safe point: the run is complete and logged
            exc = Interrupted(signal_name)
            exc.args = (f"interrupted by {signal_name} after the run had finished; its results are logged",)
            raise exc
        return result
    finally:
        restore()


def _run(cfg: DictConfig, overrides: list[str] | None, restore: Callable[[], None], stop: StopRequest) -> Result:
    resolved = to_dict(cfg)
    components = build_components(cfg, stop)
    key = cell_key(resolved, data_fingerprint(components.parts.subsets))

    def waiting() -> None:
        log.warning("cell %s is being run by another process; waiting for it to end, then resuming from its predictions", key)

    with cell_lock(components.settings.cache_dir / "locks", f"cell-{key}", on_wait=waiting):
        return finished_cell(cfg, key, components) or _run_cell(cfg, overrides, restore, resolved, components, key)


def cell_tags(key: str, overrides: list[str] | None) -> dict[str, str]:
    """The tags of a cell's MLflow run: its key (what ``resume=true`` finds it by) and its overrides."""
    return {"t2exp.cell_key": key, "t2exp.overrides": " ".join(redact_overrides(list(overrides or [])))}


def finished_cell(cfg: DictConfig, key: str, components: Components, *, mirror: bool = True) -> Result | None:
    """With ``resume=true``, the result of the cell's FINISHED MLflow run (``mirror``: listed under
    the current sweep as well), or None: the cell is to run."""
    tr = cfg.tracking
    if not cfg.get("resume"):
        return None
    done = finished_run_for(tr.uri, tr.experiment, tr.get("artifact_location"), key)
    if done is None:
        return None
    mirrored = mirror_into_sweep(tr.uri, tr.experiment, tr.get("artifact_location"), done, _run_name(cfg)) if mirror else None
    log.info("resume: cell %s already FINISHED as MLflow run %s; skipped%s", key, done.info.run_id,
             f" (listed under this sweep as run {mirrored})" if mirrored else "")
    return Result(metrics=dict(done.data.metrics), predictions_path=components.settings.run_dir / "predictions.jsonl", skipped=True)


def _run_cell(cfg: DictConfig, overrides: list[str] | None, restore: Callable[[], None], resolved: dict, components: Components,
              key: str, *, tags: dict[str, str] | None = None, parent: str | None = None, name: str | None = None) -> Result:
    """Run the cell (or, with ``tags``/``parent``/``name``, one shard of it) as one MLflow run."""
    tr = cfg.tracking
    components.stop.check()
    name = name or _run_name(cfg)
    tracker = Tracker(tr.uri, tr.experiment, tr.get("artifact_location"), name, tags or cell_tags(key, overrides), parent=parent)
    log.info("MLflow run %s (%s) in %s", tracker.run_id, name, tr.uri)
    status = "FAILED"
    try:
        tracker.log_params(cell_params(resolved, components))
        tracker.log_inputs(components.parts.subsets)
        result = run_steps(components)
        result.run_id = tracker.run_id
        log_result(tracker, cfg, components, result)
        status = "FINISHED"
        _print_summary(result, components, tracker, cfg)
        return result
    except Interrupted as exc:
        status = "KILLED"
        exc.args = (
            f"interrupted by {exc.signal_name}; MLflow run {tracker.run_id} marked KILLED; the predictions so far "
            f"are kept in {components.settings.run_dir}: run the same command again to resume",
        )
        log.error("%s", exc.args[0])
        raise
    except TrackingError as exc:  # the store failed: what the run made is on disk, a re-run logs it
        raise TrackingError(f"{exc}; the predictions so far are kept in {components.settings.run_dir}: "
                            f"run the same command again to resume and log them") from None
    except T2ExpError as exc:
        tracker.set_tags({"t2exp.error": str(exc)})
        raise
    except Exception as exc:
        tracker.set_tags({"t2exp.error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    finally:
        getattr(restore, "closing", lambda: None)()
        tracker.finish(status)


def cell_params(resolved: dict, c: Components) -> dict[str, Any]:
    """A run's MLflow params: its resolved config (no hydra, no options' meta) and its data files."""
    params = flatten({k: v for k, v in without_meta(resolved).items() if k != "hydra"})
    params.update({f"dataset.source_files.{s.name}": ";".join(s.sources) for s in c.parts.subsets})
    return params


def log_result(tracker: Tracker, cfg: DictConfig, c: Components, result: Result) -> None:
    """A finished cell's metrics, artifacts (predictions, leaderboard, config, metrics.json,
    prompts) and views on its MLflow run: an unsharded run's and a sharded cell's merge alike."""
    tracker.log_metrics({**result.metrics, **headline_metrics(result.metrics, c.settings.k)})
    _log_artifacts(tracker, cfg, c, result)
    _log_views(tracker, cfg, c, result)


def _log_artifacts(tracker: Tracker, cfg: DictConfig, c: Components, result: Result) -> None:
    secrets = env_secrets()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_p = Path(tmp)
        pred_text = redact_text(result.predictions_path.read_text(encoding="utf-8"), secrets)
        atomic_write_text(tmp_p / "predictions.jsonl", pred_text)
        tracker.log_artifact(tmp_p / "predictions.jsonl")
        tracker.log_artifact(c.settings.run_dir / "leaderboard.jsonl")
        cfg_text = OmegaConf.to_yaml(OmegaConf.create(flatten({k: v for k, v in to_dict(cfg).items() if k != "hydra"})))
        atomic_write_text(tmp_p / "config.yaml", redact_text(cfg_text, secrets))
        tracker.log_artifact(tmp_p / "config.yaml")
        atomic_write_text(tmp_p / "metrics.json", json.dumps(result.table, indent=2))
        tracker.log_artifact(tmp_p / "metrics.json")
        pdir = tmp_p / "prompts"
        pdir.mkdir()
        for name, text in c.parts.prompts.used.items():
            (pdir / f"{name}.j2").write_text(text, encoding="utf-8")
        if c.parts.prompts.used:
            tracker.log_artifact(pdir)


def _log_views(tracker: Tracker, cfg: DictConfig, c: Components, result: Result) -> None:
    """The run as the MLflow UI shows it: its result table as the description, the predictions as
    an MLflow table, and one trace per question: for every question with ``tracking.traces=true``,
    none with ``false``, else for at most ``tracking.trace_limit`` questions, chosen by question id
    alone (``inspection.traced_rows``: two cells over the same questions trace the same ones)."""
    rows = list(read_jsonl(result.predictions_path))
    what = f"**{_run_name(cfg)}** on {', '.join(f'{s.name} ({len(s.questions)} questions)' for s in c.parts.subsets)}"
    tracker.set_tags({"mlflow.note.content": description(results_markdown(result.table, c.settings.k), what)})
    tracker.log_table(predictions_table(rows), TABLE_FILE)
    wanted = cfg.tracking.get("traces")
    if wanted is not False:
        limit = None if wanted else int(cfg.tracking.get("trace_limit", TrackingConfig.trace_limit))
        tracker.log_traces(rows, c.settings.k, result.spans, limit=limit)


def _print_summary(result: Result, c: Components, tracker: Tracker, cfg: DictConfig) -> None:
    text = results_table(result.table, c.settings.k) + "\n" + run_footer(
        tracker.run_id, str(cfg.tracking.experiment), str(tracker.experiment_id), str(cfg.tracking.uri), result.predictions_path)
    print(text, file=sys.stderr)
    if os.environ.get(PARENT_ENV):  # a sweep cell: one line for the sweep's log
        avg = result.table.get("avg", {})
        shown = ", ".join(f"{metric_label(n)} {tabular.value(avg[n]['mean'])}" for n in ("nm", f"mrr_at_{c.settings.k}") if n in avg)
        log.info("cell done: %s: %s (MLflow run %s)", _run_name(cfg), shown or "no metrics", tracker.run_id)
