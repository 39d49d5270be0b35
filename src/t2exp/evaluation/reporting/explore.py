"""``t2exp explore``: one self-contained HTML page of a sweep's questions (or of runs, or of any
system's predictions files), every cell side by side (:mod:`t2exp.cli.explore`; a sweep's end
writes it beside its report).

Every number comes from what exists: the runs' rows as ``t2exp compare`` reads them
(:func:`~t2exp.evaluation.comparisons.load_source`: an outside file scored on the fly), each
question's value by the evaluator (:func:`~t2exp.evaluation.metrics.question_value`), each cell's
mean and CI as a run aggregates them (:func:`~t2exp.evaluation.metrics.aggregate`), each cell
against the baseline by the one engine (:func:`~t2exp.evaluation.paired.compare_pairs`: the
difference, its CI, p and Holm's p, the questions that differ), the error category of ``t2exp
report --errors`` (:func:`~t2exp.evaluation.diagnosis.category`). The page is the template
``explore.html`` (inline CSS and JavaScript) with the data inlined as JSON: nothing is fetched
when it is viewed, from ``file://`` or as an MLflow artifact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2exp.evaluation.comparisons import check_metric, default_metric, lazy_client, load_source
from t2exp.evaluation.diagnosis import category
from t2exp.evaluation.metrics import aggregate, metric_label, question_value
from t2exp.evaluation.paired import OVERALL, CompareError, compare_pairs, load_run_predictions
from t2exp.evaluation.questions import answer_of, gold_rank, index_by_question
from t2exp.evaluation.reporting.build import default_out_dir
from t2exp.evaluation.reporting.runs import RUN_ID, RunInfo, resolve_target
from t2exp.evaluation.reporting.tables import select_baseline
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.evaluation.tabular import COSTS, costs_logged
from t2exp.infra.mlflow_store import child_runs, open_client

TEMPLATE = Path(__file__).with_name("explore.html")
PAGE = "explore.html"


@dataclass
class ExploredRun:
    """One column group of the page: a run's (or a file's) prediction rows."""

    name: str
    rows: list[dict[str, Any]]
    run_id: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # what the run logged (none: a file)


@dataclass
class Explored:
    """What the page shows: its title, the cells (the baseline first), the notes."""

    title: str
    cells: list[ExploredRun]
    notes: list[str] = field(default_factory=list)
    parent_id: str | None = None


def gather(sources: Sequence[str], baseline: str | None = None, tracking_uri: str | None = None) -> Explored:
    """One source that names a sweep (a parent run id or an experiment name): its FINISHED cells
    (:func:`resolve_target`), ``baseline`` naming one (a run id or ``key=value`` overrides;
    default the first). Else each source a run id or a predictions file
    (:func:`load_source`), ``baseline`` one of them as given (default the first)."""
    client = lazy_client(tracking_uri)
    if len(sources) == 1 and _swept(client, sources[0]):
        swept = resolve_target(client(), sources[0])
        base = select_baseline(swept.runs, baseline) if baseline else swept.runs[0]
        runs = [base, *(r for r in swept.runs if r is not base)]
        cells = [ExploredRun(r.name, load_run_predictions(client(), r.run_id), r.run_id, r.metrics) for r in runs]
        return Explored(swept.title, cells, list(swept.notes), swept.parent_id)
    if baseline is not None and baseline not in sources:
        raise CompareError(f"--baseline {baseline}: not one of the runs given ({', '.join(sources)}); give one of them as written")
    ordered = sorted(sources, key=lambda s: s != (baseline or sources[0]))
    loaded = [(s, load_source(client, s)) for s in ordered]  # every source read (or refused) before a name is looked up
    cells = [_source_cell(client, s, rows) for s, rows in loaded]
    return Explored(" vs ".join(c.name for c in cells), cells)


def _swept(client: Callable[[], Any], source: str) -> bool:
    """``source`` names a sweep: no file, and no run id without child runs (one cell's run)."""
    if Path(source).is_file() or source.endswith((".jsonl", ".json")):
        return False
    return RUN_ID.match(source) is None or bool(child_runs(client(), source))


def _source_cell(client: Callable[[], Any], source: str, rows: list[dict[str, Any]]) -> ExploredRun:
    """A file by its path, a run by its MLflow name, with what it logged."""
    if Path(source).is_file():
        return ExploredRun(source, rows)
    run = RunInfo.from_mlflow(client().get_run(source))
    return ExploredRun(f"{run.name} ({source[:8]})", rows, source, run.metrics)


def _finite(v: Any) -> Any:
    """JSON has no NaN or infinity: None instead."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _headline(cells: Sequence[ExploredRun], metric: str, n_boot: int, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Per cell: its mean and CI per subset and overall (as a run aggregates them), what it cost
    (as its run logged it); per other cell: its difference with the baseline (cell 0), CI, p and
    Holm's p over the cells."""
    result = compare_pairs(lambda i: cells[int(i)].rows, [(str(i), "0") for i in range(1, len(cells))], metric, n_boot=n_boot, seed=seed)
    deltas = {int(c.a): c for c in result.pairs}
    out = []
    for i, cell in enumerate(cells):
        rows = [{"subset": r.get("subset"), metric: question_value(r, metric)} for r in cell.rows]
        means = {
            (OVERALL if s == "avg" else s): [_finite(v.mean), _finite(v.ci_low), _finite(v.ci_high), v.n]
            for s, m in aggregate(rows, [metric], ci=True, n_boot=n_boot, seed=seed).items()
            for v in [m.get(metric)]
            if v is not None
        }
        c = deltas.get(i)
        delta = None if c is None else {s: [d.diff, d.low, d.high, d.p, d.p_holm] for s, d in c.deltas().items()}
        differ = [] if c is None else [[q.subset, q.id] for q in c.questions]
        cost = {name: cell.metrics[name] for name, _, _ in COSTS if name in cell.metrics}
        out.append({"name": cell.name, "run_id": cell.run_id, "means": means, "delta": delta, "differ": differ, "cost": cost})
    notes = [f"{cells[int(a)].name}: not compared with the baseline: {why}" for a, _, why in result.refused]
    return out, notes


def _answer_cell(row: Mapping[str, Any] | None, metric: str) -> list[Any] | None:
    """One cell's view of one question: gold rank, answer, the metric's value, the error category,
    the retrieved ids, how many of them the prompt held, the full generation."""
    if row is None:
        return None
    answer = answer_of(row)
    full = row.get("generation")
    return [
        gold_rank(row),
        None if answer is None else str(answer),
        question_value(row, metric),
        None if row.get("nm") is None else category(row),
        row.get("retrieved"),
        row.get("n_contexts"),
        None if full == answer else full,
    ]


def page_data(explored: Explored, metric: str = "auto", n_boot: int = N_BOOT, seed: int = CI_SEED) -> dict[str, Any]:
    """The page's data: the headline per cell, one row per question (subset, id, question, gold,
    gold document, how many cells differ from the baseline on it) and each cell's view of it."""
    cells = explored.cells
    if metric == "auto":
        metric = default_metric(cells[0].rows, *(c.rows for c in cells[1:]))
    headline, notes = _headline(cells, metric, n_boot, seed)
    differ: dict[tuple[str, str], int] = {}
    for h in headline:
        for s, i in h.pop("differ"):
            differ[(s, i)] = differ.get((s, i), 0) + 1
    indexed = [index_by_question(c.rows)[0] for c in cells]
    keys = sorted({k for ix in indexed for k in ix})
    questions = []
    for key in keys:
        row = next(ix[key] for ix in indexed if key in ix)
        questions.append(
            [key[0], key[1], row.get("question"), _finite(row.get("gold_raw", row.get("gold"))), row.get("context_id"), differ.get(key, 0)]
        )
    return {
        "title": explored.title,
        "metric": metric,
        "metric_label": metric_label(metric),
        "answered": metric.startswith("nm"),
        "notes": [*explored.notes, *notes],
        "cells": headline,
        "cost_columns": costs_logged(c.metrics for c in cells),
        "subsets": sorted({k[0] for k in keys}) + [OVERALL],
        "questions": questions,
        "values": [[_answer_cell(ix.get(k), metric) for k in keys] for ix in indexed],
    }


def inline_json(data: Any) -> str:
    """``data`` as JSON that can sit inside ``<script type="application/json">``: no ``<``, ``>``
    or ``&`` (``</script>``, ``<!--`` in a model's answer cannot end the script) nor the line
    separators JavaScript reads as line ends."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for ch in "<>&\u2028\u2029":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


def render_page(data: Mapping[str, Any]) -> str:
    """The page: the template with ``data`` inlined."""
    head, tail = TEMPLATE.read_text(encoding="utf-8").split("/*DATA*/", 1)
    return head + inline_json(data) + tail


def write_page(path: Path, data: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(data), encoding="utf-8")
    return path


def explore(
    sources: Sequence[str],
    out: str | Path | None = None,
    *,
    baseline: str | None = None,
    metric: str = "auto",
    tracking_uri: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
) -> Path:
    """The page of ``sources`` (:func:`gather`) written to ``out`` (a folder gets ``explore.html``;
    default ``outputs/reports/<parent run id, experiment or first file's name>/explore.html``
    under the current directory); its path. Raises a :class:`~t2exp.errors.T2ExpError` (one
    line) when the sources cannot be read or compared."""
    check_metric(metric, n_boot)
    explored = gather(sources, baseline, tracking_uri)
    if out is None:
        first = Path(sources[0])
        path = default_out_dir(explored.parent_id or (first.stem if first.is_file() else sources[0])) / PAGE
    else:
        path = Path(out) / PAGE if Path(out).is_dir() else Path(out)
    return write_page(path, page_data(explored, metric, n_boot, seed))


def explore_parent(tracking_uri: str, parent_id: str, work: Path | None = None) -> Path:
    """The page of a sweep's cells (the first the baseline) written beside the sweep's report,
    ``outputs/reports/<parent id>/explore.html`` under ``work``, and logged under ``report/`` of
    the parent run (what a sweep's end does)."""
    path = write_page(default_out_dir(parent_id, work) / PAGE, page_data(gather([parent_id], tracking_uri=tracking_uri)))
    open_client(tracking_uri).log_artifact(parent_id, str(path), "report")
    return path
