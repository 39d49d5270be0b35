"""Report, compute: which runs are rows, their cells (through the evaluator), Δ vs best and the
corpus-size curve."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from t2exp.data.loader import SUBSETS
from t2exp.errors import T2ExpError
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import (
    METRIC,
    NM_METRICS,
    aggregate,
    is_headline,
    metric_label,
    paper_order_names,
    question_value,
)
from t2exp.evaluation.paired import OTHER_QUESTIONS, OVERALL, Delta, compare_pairs
from t2exp.evaluation.reporting.runs import ReportError, RunInfo
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.infra.option_meta import display_order, option_metas
from t2exp.infra.paths import CONF_DIR

AVG = "avg"


@functools.cache
def method_order() -> tuple[str, ...]:
    """The rag_method options in report order, from their own ``meta.order`` (the paper's Table 3
    order, then t2exp's; ``t2exp.infra.option_meta``): one place, read from the shipped options."""
    return tuple(display_order(option_metas(CONF_DIR, "rag_method")))


SEED_KEYS = ("dataset.corpus_seed", "seed")


def swept_keys(runs: Sequence[RunInfo]) -> list[str]:
    """Keys whose value differs between runs: override keys first, then the main groups and k."""
    candidates: list[str] = ["generator", "rag_method", "protocol"]
    for r in runs:
        for key in r.overrides:
            if key not in candidates:
                candidates.append(key)
    for key in ("embedder", "k", "reranker", "store", "dataset"):
        if key not in candidates:
            candidates.append(key)
    return [k for k in candidates if len({r.label(k) for r in runs}) > 1]


def _sort_value(key: str, value: str) -> tuple[Any, ...]:
    if key == "rag_method" and value in method_order():
        return (0, method_order().index(value), "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1 if value in ("null", "-") else 0, math.inf, value)


def label_keys(runs: Sequence[RunInfo], first: Sequence[str]) -> list[str]:
    keys = list(first) + [k for k in swept_keys(runs) if k not in first]
    if len({tuple(r.label(k) for k in keys) for r in runs}) < len(runs):
        keys.append("run")  # identical labels (e.g. a config key set outside the overrides): tell them apart
    return keys


def sort_runs(runs: Sequence[RunInfo], keys: Sequence[str]) -> list[RunInfo]:
    return sorted(runs, key=lambda r: tuple(_sort_value(k, r.label(k)) for k in keys))


def find_subsets(runs: Sequence[RunInfo]) -> list[str]:
    found: set[str] = set()
    for r in runs:
        for name in r.metrics:
            subset, _, metric = name.partition("/")
            if subset != AVG and METRIC.match(metric) and not is_headline(name):
                found.add(subset)
    return sorted(found, key=lambda s: (SUBSETS.index(s) if s in SUBSETS else len(SUBSETS), s))


@dataclass(frozen=True)
class Entry:
    """One number of a report table: its mean and 95 % CI (``derived``: recomputed, marked †)."""

    mean: float | None
    low: float | None = None
    high: float | None = None
    derived: bool = False

    @property
    def text(self) -> str:
        """The value and its CI as every report table writes it (``evaluation.tabular``)."""
        return tabular.value(self.mean, self.low, self.high)


class CellSource:
    """Logged metrics first; a missing retrieval metric is recomputed from predictions.jsonl."""

    def __init__(self, loader: Callable[[str], list[dict[str, Any]] | None]) -> None:
        self._loader = loader
        self._preds: dict[str, list[dict[str, Any]] | None] = {}

    def predictions(self, run_id: str) -> list[dict[str, Any]] | None:
        if run_id not in self._preds:
            try:
                self._preds[run_id] = self._loader(run_id)
            except T2ExpError:
                self._preds[run_id] = None
        return self._preds[run_id]

    def cell(self, run: RunInfo, subset: str, metric: str) -> Entry:
        key = f"{subset}/{metric}"
        if key in run.metrics:
            return Entry(run.metrics[key], run.metrics.get(f"{key}_ci_low"), run.metrics.get(f"{key}_ci_high"))
        if metric in NM_METRICS:
            return Entry(None)
        # the evaluator on the run's own rows, aggregated as the app aggregates a run
        rows = [{"subset": r.get("subset"), metric: question_value(r, metric)} for r in self.predictions(run.run_id) or []]
        mv = aggregate(rows, [metric], ci=True, n_boot=N_BOOT, seed=CI_SEED).get(subset, {}).get(metric)
        if mv is None:
            return Entry(None)
        return Entry(mv.mean, mv.ci_low, mv.ci_high, derived=True)


@dataclass
class Table:
    name: str
    title: str
    keys: list[str]
    runs: list[RunInfo]
    columns: list[tuple[str, str]]  # (subset, metric)
    cells: dict[tuple[str, str, str], Entry]  # (run_id, subset, metric)
    primary: str | None = None
    best: str | None = None  # the row every other is compared with: the best one, or --baseline's
    named_baseline: bool = False  # best is the row --baseline named (not the best average)
    deltas: dict[str, Delta] = field(default_factory=dict)
    subset_deltas: dict[str, dict[str, Delta]] = field(default_factory=dict)  # run id -> subset -> its Δ
    notes: list[str] = field(default_factory=list)
    costs: list[tuple[str, str, int]] = field(default_factory=list)  # tabular.COSTS shown after the values (Table 3)

    @property
    def m(self) -> int:
        """How many comparisons the Holm correction is over."""
        return len(self.deltas)


def readings_columns(subsets: Sequence[str], k: int) -> list[tuple[str, str]]:
    """The metric readings side by side (the authors' protocol next to t2exp's): per subset NM and
    MRR@k in both orders; for the weighted average every NM reading, MRR@k and R@1 in both orders
    and R@5."""
    mrr, (mrr_paper, r1_paper) = f"mrr_at_{k}", paper_order_names(k)
    cols = [(s, m) for s in subsets for m in ("nm", mrr, mrr_paper)]
    return cols + [(AVG, m) for m in (*NM_METRICS, mrr, mrr_paper, "recall_at_1", r1_paper, "recall_at_5")]


def build_table(
    name: str,
    title: str,
    runs: Sequence[RunInfo],
    keys: list[str],
    subsets: Sequence[str],
    metrics: Sequence[str],
    source: CellSource,
    columns: Sequence[tuple[str, str]] | None = None,
) -> Table:
    ordered = sort_runs(runs, keys)
    if columns is None:
        columns = [(s, m) for s in [*subsets, AVG] for m in metrics]
    else:
        metrics = list(dict.fromkeys(m for _, m in columns))
    cells = {(r.run_id, s, m): source.cell(r, s, m) for r in ordered for s, m in columns}
    used = [(s, m) for s, m in columns if any(cells[(r.run_id, s, m)].mean is not None for r in ordered)]
    t = Table(name, title, keys, ordered, used, cells)
    empty = [m for m in metrics if all((s, m) not in used for s in [*subsets, AVG])]
    if empty:
        t.notes.append(
            f"Not computed by any run (left out): {', '.join(metric_label(m) for m in empty)}"
            + (" — retrieval-only runs (generator=none) have no NM" if "nm" in empty else "")
        )
    return t


def select_baseline(runs: Sequence[RunInfo], spec: str) -> RunInfo:
    """The run ``--baseline`` names: a run id (or a unique prefix of one, 6+ characters), or
    overrides ``key=value [key=value ...]`` that exactly one run's labels match (e.g.
    ``rag_method=base``, ``rag_method=hybrid k=5``)."""
    spec = spec.strip()
    if "=" not in spec:
        hits = [r for r in runs if len(spec) >= 6 and r.run_id.startswith(spec)]
    else:
        pairs = [t.lstrip("+~").split("=", 1) for t in spec.replace(",", " ").split()]
        hits = [r for r in runs if all(_label_matches(r, key, value) for key, value in pairs)]
    if len(hits) == 1:
        return hits[0]
    rows = "; ".join(f"{r.run_id[:8]} ({r.name})" for r in runs)
    what = "no run" if not hits else f"{len(hits)} runs"
    raise ReportError(
        f"--baseline {spec!r}: {what} of the report match(es); give one run id (6+ characters) or "
        f"key=value overrides that one run has: {rows}"
    )


def _label_matches(run: RunInfo, key: str, value: str) -> bool:
    key = key.split("@", 1)[0]
    return run.label(key) == value or run.overrides.get(key) == value


def _best_row(table: Table, metrics: Sequence[str], primary: str) -> RunInfo | None:
    means = [(table.cells[(r.run_id, AVG, primary)].mean, r) for r in table.runs]
    scored = [(v, r) for v, r in means if v is not None]

    def rank(item: tuple[float, RunInfo]) -> tuple[float, ...]:  # ties: the later metrics decide
        later = [table.cells[(item[1].run_id, AVG, m)].mean for m in metrics[metrics.index(primary) + 1 :]]
        return (item[0], *[-math.inf if v is None else v for v in later])

    return max(scored, key=rank)[1] if scored else None


def add_deltas(table: Table, metrics: Sequence[str], source: CellSource, n_boot: int, seed: int, baseline: str | None = None) -> None:
    """Δ vs the baseline: each row against the row with the best question-weighted average, or the
    row ``baseline`` names (:func:`select_baseline`); the p-values Holm-corrected over the rows
    compared."""
    primary = next((m for m in metrics if any(table.cells[(r.run_id, AVG, m)].mean is not None for r in table.runs)), None)
    if primary is None or len(table.runs) < 2:
        return
    base = select_baseline(table.runs, baseline) if baseline else _best_row(table, metrics, primary)
    if base is None:
        return
    table.primary, table.best, table.named_baseline = primary, base.run_id, bool(baseline)
    if source.predictions(base.run_id) is None:
        table.notes.append("Δ vs baseline: the baseline run has no predictions.jsonl artifact")
        return
    compared = [
        (r.run_id, base.run_id) for r in table.runs if r.run_id != base.run_id and table.cells[(r.run_id, AVG, primary)].mean is not None
    ]
    result = compare_pairs(source.predictions, compared, primary, same_questions=True, n_boot=n_boot, seed=seed)
    table.deltas = {c.a: c.delta for c in result.pairs}
    table.subset_deltas = {c.a: {s: d for s, d in c.deltas().items() if s != OVERALL} for c in result.pairs}
    if result.count(OTHER_QUESTIONS):
        table.notes.append(
            f"Δ vs baseline: not shown for {result.count(OTHER_QUESTIONS)} row(s) asked other questions than the baseline row"
        )


@dataclass
class CurvePoint:
    group: tuple[str, ...]
    subset: str
    size: str  # the dataset.corpus_size param ("null" = full corpus)
    docs: float  # indexed documents (the logged <subset>/corpus_size)
    mean: float
    std: float
    n: int
    questions: float
    values: list[float]


def corpus_curve(
    runs: Sequence[RunInfo], keys: Sequence[str], subsets: Sequence[str], metric: str, source: CellSource
) -> tuple[list[str], list[CurvePoint]]:
    group_keys = [k for k in keys if k not in ("dataset.corpus_size", "run", *SEED_KEYS) and len({r.label(k) for r in runs}) > 1]
    buckets: dict[tuple[tuple[str, ...], str, str], list[RunInfo]] = {}
    for r in runs:
        g = tuple(r.label(k) for k in group_keys)
        for s in subsets:
            buckets.setdefault((g, s, r.label("dataset.corpus_size")), []).append(r)
    points: list[CurvePoint] = []
    for (g, s, size), rs in buckets.items():
        vals, docs, qs = [], [], []
        for r in rs:
            c = source.cell(r, s, metric)
            d = r.metrics.get(f"{s}/corpus_size")
            if c.mean is None or d is None:
                continue
            vals.append(c.mean)
            docs.append(d)
            qs.append(r.metrics.get(f"{s}/questions", float("nan")))
        if vals:
            std = statistics.stdev(vals) if len(vals) > 1 else 0.0
            points.append(
                CurvePoint(g, s, size, statistics.fmean(docs), statistics.fmean(vals), std, len(vals), statistics.fmean(qs), vals)
            )
    points.sort(key=lambda p: (p.group, subsets.index(p.subset), p.docs))
    return group_keys, points
