"""Report, the metric by where the gold document ranked: each cell's NM over the questions whose
gold document was retrieved at rank 1, at ranks 2..k, or not in the top k (the per-rank breakdown
of the T²-RAGBench analyses), per subset and over all questions. Computed from each run's
``predictions.jsonl`` by the app's evaluator (:func:`t2exp.evaluation.metrics.question_value`:
the gold rank from ``mrr_at_<k>``, recomputed from ``retrieved`` for another k) and aggregated
as a run aggregates (:func:`t2exp.evaluation.metrics.aggregate`, 95 % bootstrap CIs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import MetricValue, aggregate, metric_label, question_value
from t2exp.evaluation.questions import index_by_question
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import AVG, CellSource
from t2exp.evaluation.stats import CI_SEED, N_BOOT

BUCKETS = ("rank_1", "ranks_2_k", "not_retrieved")
ALL = "all"  # every question with a ranking (the run's own value of the metric over them)


def gold_bucket(row: Mapping[str, Any], k: int) -> str | None:
    """Where the gold document of a prediction row ranked within the top ``k``: ``rank_1``,
    ``ranks_2_k``, ``not_retrieved`` (not in the top k); None for a method that ranks nothing."""
    rr = question_value(row, f"mrr_at_{k}")
    if rr is None:
        return None
    return "rank_1" if rr >= 1.0 else ("ranks_2_k" if rr > 0 else "not_retrieved")


def rank_breakdown(
    rows: Sequence[Mapping[str, Any]], k: int, metric: str = "nm", n_boot: int = N_BOOT, seed: int = CI_SEED
) -> dict[str, dict[str, MetricValue]]:
    """``{subset | "avg": {bucket | "all": MetricValue}}``: ``metric`` (percent, CI) over the
    questions of each gold-rank bucket, per subset and over every subset (``avg``)."""
    latest = index_by_question(rows)[0].values()  # a resumed run's repeated question counts once
    scored = [(str(r.get("subset")), b, question_value(r, metric)) for r in latest if (b := gold_bucket(r, k)) is not None]
    out: dict[str, dict[str, MetricValue]] = {}
    for subset in [*sorted({s for s, _, _ in scored}), AVG]:
        part = [{"subset": b, metric: v} for s, b, v in scored if subset in (AVG, s)]
        table = aggregate(part, [metric], ci=True, n_boot=n_boot, seed=seed)
        cells = {b: table[b][metric] for b in BUCKETS if metric in table.get(b, {})}
        if cells:
            cells[ALL] = table[AVG][metric]
            out[subset] = cells
    return out


@dataclass
class RankTable:
    keys: list[str]
    runs: list[RunInfo]
    subsets: list[str]
    k: int
    metric: str
    cells: dict[str, dict[str, dict[str, MetricValue]]]  # run_id -> rank_breakdown


def build_ranks(
    runs: Sequence[RunInfo], keys: list[str], subsets: Sequence[str], k: int, source: CellSource, metric: str = "nm"
) -> RankTable | None:
    """The breakdown of every run (in ``runs``' order) with a value of ``metric``; None when no
    run has one (retrieval-only runs have no NM)."""
    cells = {}
    for r in runs:
        got = rank_breakdown(source.predictions(r.run_id) or [], k, metric)
        if got:
            cells[r.run_id] = got
    if not cells:
        return None
    return RankTable(keys, [r for r in runs if r.run_id in cells], [*subsets, AVG], k, metric, cells)


def _bucket_header(bucket: str, k: int) -> str:
    return {"rank_1": "gold at rank 1", "ranks_2_k": f"gold at ranks 2–{k}", "not_retrieved": f"gold not in top {k}", ALL: "all"}[bucket]


def _cell(v: MetricValue | None) -> str:
    return tabular.MISSING if v is None else f"{tabular.value(v.mean, v.ci_low, v.ci_high)} (n={v.n})"


def render_ranks(t: RankTable, headers: Mapping[str, str]) -> str:
    label = metric_label(t.metric)
    head = [headers.get(k, k) for k in t.keys] + ["Subset"] + [f"{label}, {_bucket_header(b, t.k)}" for b in (*BUCKETS, ALL)]
    rows = []
    for r in t.runs:
        for s in t.subsets:
            got = t.cells[r.run_id].get(s)
            if got is not None:
                rows.append([*(r.label(k) for k in t.keys), "Avg" if s == AVG else s, *(_cell(got.get(b)) for b in (*BUCKETS, ALL))])
    lines = [
        f"## {label} by where the gold document ranked (top {t.k})",
        "",
        tabular.markdown(head, rows, left=len(t.keys) + 1),
        "",
        f"Values in %, 95 % bootstrap CI in brackets, n = questions; recomputed from each run's predictions.jsonl "
        f"by the app's evaluator. 'all' = every question with a ranking and a {label} value.",
    ]
    return "\n".join(lines) + "\n"


def write_ranks_csv(t: RankTable, path: Path) -> None:
    head = [*t.keys, "run_id", "subset"]
    for b in (*BUCKETS, ALL):
        head += [f"{t.metric}_{b}", f"{t.metric}_{b}_ci_low", f"{t.metric}_{b}_ci_high", f"n_{b}"]
    rows = []
    for r in t.runs:
        for s in t.subsets:
            got = t.cells[r.run_id].get(s)
            if got is None:
                continue
            row: list[Any] = [*(r.label(k) for k in t.keys), r.run_id, s]
            for b in (*BUCKETS, ALL):
                v = got.get(b)
                row += ["", "", "", 0] if v is None else [repr(v.mean), repr(v.ci_low), repr(v.ci_high), v.n]
            rows.append(row)
    tabular.write_csv(path, head, rows)
