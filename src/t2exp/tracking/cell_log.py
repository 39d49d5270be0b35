"""A cell's MLflow run, from open to close: its name, tags and params, the run a ``resume=true`` finds
FINISHED, and what a finished cell logs (metrics, artifacts, the views the MLflow UI shows, the
terminal summary). The pipeline hands it plain results (:class:`CellResult`); it knows no stage."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig, OmegaConf

from t2exp.config import to_dict
from t2exp.config.schema import TrackingConfig
from t2exp.data.records import Subset
from t2exp.errors import T2ExpError, TrackingError
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import headline_metrics, metric_label
from t2exp.evaluation.scoring.cell_rows import Prediction
from t2exp.infra.cache import atomic_write_text
from t2exp.infra.mlflow_store import Tag
from t2exp.infra.option_meta import without_meta
from t2exp.infra.redaction import env_secrets, redact_overrides, redact_text
from t2exp.infra.signals import Interrupted
from t2exp.tracking.inspection import TABLE_FILE, description, predictions_table, traced_keys, traced_rows
from t2exp.tracking.mlflow_run import PARENT_ENV, Tracker, finished_run_for, flatten, mirror_into_sweep
from t2exp.tracking.names import cell_name, swept_values
from t2exp.tracking.summary import results_markdown, results_table, run_footer

log = logging.getLogger("t2exp")


class CellResult(Protocol):
    """What a cell's steps hand the log (``t2exp.pipeline.steps.Result``)."""

    metrics: dict[str, float]
    predictions_path: Path
    rows: list[Prediction]  # every question's row, in the run's question order
    table: dict[str, dict[str, Any]]
    spans: dict[str, dict[str, tuple[int, int]]]
    run_id: str | None


def run_name(cfg: DictConfig) -> str:
    """``bm25f · minilm · k=3``: short enough for the MLflow runs table; in a sweep, with the keys
    its cells differ in (:func:`t2exp.tracking.names.swept_values`; the sweep's end sets them on
    every cell, :func:`t2exp.tracking.names.name_sweep_cells`)."""
    return cell_name(str(cfg.rag_method.name), str(cfg.embedder.name), str(cfg.k), swept_values())


def cell_tags(key: str, overrides: list[str] | None) -> dict[str, str]:
    """The tags of a cell's MLflow run: its key (what ``resume=true`` finds it by) and its overrides."""
    return {Tag.CELL_KEY: key, Tag.OVERRIDES: " ".join(redact_overrides(list(overrides or [])))}


def cell_params(resolved: Mapping[str, Any], subsets: Sequence[Subset]) -> dict[str, Any]:
    """A run's MLflow params: its resolved config (no hydra, no options' meta) and its data files."""
    params = flatten({k: v for k, v in without_meta(dict(resolved)).items() if k != "hydra"})
    params.update({f"dataset.source_files.{s.name}": ";".join(s.sources) for s in subsets})
    return params


def cost_usd(metrics: Mapping[str, float], price: Mapping[str, Any] | None) -> dict[str, float]:
    """``cost_usd``: the cell's tokens at ``generator.price`` (USD per million), when both prices are set."""
    if not price or price.get("input") is None or price.get("output") is None or "prompt_tokens" not in metrics:
        return {}
    return {"cost_usd": (metrics["prompt_tokens"] * float(price["input"]) + metrics["completion_tokens"] * float(price["output"])) / 1e6}


def finished_metrics(cfg: DictConfig, key: str, *, mirror: bool = True) -> dict[str, float] | None:
    """With ``resume=true``, the metrics of the cell's FINISHED MLflow run (``mirror``: listed under
    the current sweep as well), or None: the cell is to run."""
    tr = cfg.tracking
    if not cfg.get("resume"):
        return None
    done = finished_run_for(tr.uri, tr.experiment, tr.get("artifact_location"), key)
    if done is None:
        return None
    mirrored = mirror_into_sweep(tr.uri, tr.experiment, tr.get("artifact_location"), done, run_name(cfg)) if mirror else None
    log.info(
        "resume: cell %s already FINISHED as MLflow run %s; skipped%s",
        key,
        done.info.run_id,
        f" (listed under this sweep as run {mirrored})" if mirrored else "",
    )
    return dict(done.data.metrics)


class CellLog:
    """What a cell logs on its MLflow run (``tracker``) once its steps are done: the run's config
    (``cfg``), its data (``subsets``) and ``run_dir`` (its leaderboard) beside the result."""

    def __init__(self, tracker: Tracker, cfg: DictConfig, subsets: Sequence[Subset], run_dir: Path, shard: str | None = None) -> None:
        self.tracker, self.cfg, self.subsets, self.run_dir = tracker, cfg, subsets, run_dir
        self.k = int(cfg.k)
        self.status = "FAILED"  # until log() has logged the result
        self.shard = shard  # "i/N" for a shard of a sharded cell: its slice, not the cell
        # one trace per question with tracking.traces=true, none with false, else for at most
        # tracking.trace_limit questions chosen by question id alone (inspection.traced_keys: two
        # cells over the same questions trace the same ones)
        wanted = cfg.tracking.get("traces")
        limit = None if wanted else int(cfg.tracking.get("trace_limit", TrackingConfig.trace_limit))
        keys = ((s.name, q.id) for s in subsets for q in s.questions)
        self.to_trace = set() if wanted is False else set(traced_keys(keys, limit))
        self.traced: dict[tuple[str, str], tuple[str, Mapping[str, Any]]] = {}  # (subset, id) -> (trace id, row)

    def question(self, row: Prediction, times: Mapping[str, tuple[int, int]]) -> None:
        """A question's row the moment it is written: its trace, when the run traces it (those of
        questions resumed from an earlier process are logged with the cell)."""
        if (row.subset, row.id) in self.to_trace:
            self._trace(row.to_json(), times)

    def _trace(self, r: Mapping[str, Any], times: Mapping[str, tuple[int, int]]) -> None:
        key = (str(r["subset"]), str(r["id"]))
        if key in self.to_trace and key not in self.traced:
            self.traced[key] = (self.tracker.trace(r, self.k, times), r)

    def log(self, result: CellResult, prompts: Mapping[str, str]) -> None:
        """A finished cell's metrics, artifacts (predictions, leaderboard, config, metrics.json, the
        ``prompts`` it rendered) and views on its MLflow run, summed up on the terminal: an unsharded
        run's and a sharded cell's merge alike."""
        result.run_id = self.tracker.run_id
        result.metrics.update(cost_usd(result.metrics, self.cfg.generator.get("price")))
        self.tracker.log_metrics({**result.metrics, **headline_metrics(result.metrics, self.k)})
        self._artifacts(result, prompts)
        self._views(result)
        self.status = "FINISHED"
        self.print_summary(result)

    def _artifacts(self, result: CellResult, prompts: Mapping[str, str]) -> None:
        secrets, tracker = env_secrets(), self.tracker
        with tempfile.TemporaryDirectory() as tmp:
            tmp_p = Path(tmp)
            pred_text = redact_text(result.predictions_path.read_text(encoding="utf-8"), secrets)
            atomic_write_text(tmp_p / "predictions.jsonl", pred_text)
            tracker.log_artifact(tmp_p / "predictions.jsonl")
            tracker.log_artifact(self.run_dir / "leaderboard.jsonl")
            plain = to_dict(self.cfg)
            cfg_text = OmegaConf.to_yaml(OmegaConf.create(flatten({k: v for k, v in plain.items() if k != "hydra"})))
            atomic_write_text(tmp_p / "config.yaml", redact_text(cfg_text, secrets))
            tracker.log_artifact(tmp_p / "config.yaml")
            atomic_write_text(tmp_p / "metrics.json", json.dumps(result.table, indent=2))
            tracker.log_artifact(tmp_p / "metrics.json")
            pdir = tmp_p / "prompts"
            pdir.mkdir()
            for name, text in prompts.items():
                (pdir / f"{name}.j2").write_text(text, encoding="utf-8")
            if prompts:
                tracker.log_artifact(pdir)

    def _views(self, result: CellResult) -> None:
        """The run as the MLflow UI shows it: its result table as the description, the predictions as
        an MLflow table, and the traces of the questions it traces not traced as they were written."""
        rows = [r.to_json() for r in result.rows]
        on = ", ".join(f"{tabular.md_escape(s.name)} ({len(s.questions)} questions)" for s in self.subsets)
        what = f"**{tabular.md_escape(run_name(self.cfg))}** on {on}"
        self.tracker.set_tags({"mlflow.note.content": description(results_markdown(result.table, self.k), what)})
        self.tracker.log_table(predictions_table(rows), TABLE_FILE)
        for r in traced_rows(rows):
            self._trace(r, result.spans.get(str(r["id"]), {}))
        self.tracker.end_traces(list(self.traced.values()), self.k)

    def print_summary(self, result: CellResult) -> None:
        tracker, tr = self.tracker, self.cfg.tracking
        text = (
            results_table(result.table, self.k)
            + "\n"
            + run_footer(tracker.run_id, str(tr.experiment), str(tracker.experiment_id), str(tr.uri), result.predictions_path)
        )
        shard = f"shard {self.shard}: its slice of the cell's questions; the merge gives the cell's result\n" if self.shard else ""
        print(shard + text, file=sys.stderr)
        if os.environ.get(PARENT_ENV):  # a sweep cell: one line for the sweep's log (a shard's: of its slice)
            avg = result.table.get("avg", {})
            shown = ", ".join(f"{metric_label(n)} {tabular.value(avg[n]['mean'])}" for n in ("nm", f"mrr_at_{self.k}") if n in avg)
            done = f"shard {self.shard} done" if self.shard else "cell done"
            log.info("%s: %s: %s (MLflow run %s)", done, run_name(self.cfg), shown or "no metrics", tracker.run_id)


def start_run(
    tracking: Mapping[str, Any], name: str, tags: dict[str, str], params: Mapping[str, Any], subsets: Any, *, parent: str | None = None
) -> Tracker:
    """A cell's (or a shard's) MLflow run, created with its ``tags``, ``params`` and ``subsets`` as
    inputs (closed FAILED when those cannot be logged)."""
    tracker = Tracker(str(tracking["uri"]), str(tracking["experiment"]), tracking.get("artifact_location"), name, tags, parent=parent)
    log.info("MLflow run %s (%s) in %s", tracker.run_id, tracker.name, tracking["uri"])
    try:
        tracker.log_params(params)
        tracker.log_inputs(subsets)
    except BaseException:
        tracker.finish("FAILED")
        raise
    return tracker


@contextmanager
def recording(
    cfg: DictConfig,
    tags: dict[str, str],
    params: Mapping[str, Any],
    subsets: Sequence[Subset],
    run_dir: Path,
    *,
    name: str | None = None,
    parent: str | None = None,
    run_id: str | None = None,
    closing: Callable[[], None] = lambda: None,
) -> Iterator[CellLog]:
    """The MLflow run of a cell (with ``parent``/``name``: of one shard of it; with ``run_id``: the
    sharded cell's run its first shard opened), opened with its ``tags``, ``params`` and ``subsets``
    as inputs; the block runs the cell and calls :meth:`CellLog.log`. Closed FINISHED once logged,
    KILLED when a signal stopped it, else FAILED with the error as a tag; ``closing`` is called
    first (a signal then waits for the close). The predictions so far stay in ``run_dir``: a stop's
    and a store's failure line say so."""
    tr = cfg.tracking
    if run_id is None:
        tracker = start_run(tr, name or run_name(cfg), tags, params, subsets, parent=parent)
    else:
        tracker = Tracker.attach(str(tr.uri), run_id)
    cell_log = CellLog(tracker, cfg, subsets, run_dir, tags.get(Tag.SHARD))
    try:
        yield cell_log
    except Interrupted as exc:
        cell_log.status = "KILLED"
        kept = f"the predictions so far are kept in {run_dir}: run the same command again to resume"
        stopped = Interrupted(exc.signal_name, f"MLflow run {tracker.run_id} marked KILLED; {kept}")
        log.error("interrupted by %s", stopped)
        raise stopped from None
    except TrackingError as exc:  # the store failed: what the run made is on disk, a re-run logs it
        raise TrackingError(
            f"{exc}; the predictions so far are kept in {run_dir}: run the same command again to resume and log them"
        ) from None
    except T2ExpError as exc:
        tracker.set_tags({Tag.ERROR: str(exc)})
        raise
    except Exception as exc:
        tracker.set_tags({Tag.ERROR: f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    finally:
        closing()
        tracker.finish(cell_log.status)
