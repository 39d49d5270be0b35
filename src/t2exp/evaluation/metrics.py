"""The evaluator: per-question metrics and their aggregation with bootstrap CIs.

The one place that turns a question's ranking and answer into metric values (Number Match, MRR@k,
Recall@r) and those values into per-subset and question-weighted means with percentile bootstrap
CIs. The experiment, ``t2exp.score``, ``t2exp.compare`` and ``t2exp.report`` all call it, so a
run's logged numbers, a re-score, a comparison and a report cell agree exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import SupportsFloat, cast

import numpy as np

from t2exp.config.checks import METRIC as METRIC  # the metric-name grammar (checked in configs too)
from t2exp.evaluation.stats import CI_SEED, N_BOOT, percentile_ci
from t2exp.text.numbers import is_degenerate, number_match, number_match_bare, number_match_strict

RECALL_KS = (1, 3, 5)
RANK_METRIC = re.compile(r"^(mrr|recall)_at_(\d+)$")
# the Number Match readings, every one over the same questions (those with a numeric gold):
# nm: paper §3 on t2exp's number extraction; nm_bare: the authors' bare-float() reading with their
# small-gold rule; nm_strict: relative error < eps with no power-of-ten shift
NM_METRICS = ("nm", "nm_bare", "nm_strict")
# per question 0/1, summed (not averaged) into ``<subset>/degenerate_predictions``
DEGENERATE = "degenerate"
_LABELS = {"nm": "NM", "nm_bare": "NM-bare", "nm_strict": "NM-strict"}


PAPER_ORDER = "_paper_order"


def paper_order_names(k: int) -> list[str]:
    """The authors' retrieval metrics (``paper_order``): MRR@k and Recall@1 after their re-sort."""
    return [f"mrr_at_{k}{PAPER_ORDER}", f"recall_at_1{PAPER_ORDER}"]


def question_metric_names(k: int) -> list[str]:
    """T²-RAGBench's metrics of one question: the Number Match readings, MRR@k and Recall@1/3/5
    (what a trace's feedback and the MLflow GenAI scorers give)."""
    return [*NM_METRICS, f"mrr_at_{k}", *(f"recall_at_{r}" for r in RECALL_KS)]


def scored_names(k: int, answered: bool, retrieval: str = "ranked", dense: bool = False) -> list[str]:
    """The metrics rows are scored on: NM with answers, MRR@k and R@r as their retrieval allows
    (``ranked``; ``rank1``: only the top id; ``none``), the paper-order readings with dense scores."""
    names = (list(NM_METRICS) if answered else []) + ([] if retrieval == "none" else [f"mrr_at_{k}"])
    names += {"ranked": [f"recall_at_{r}" for r in RECALL_KS], "rank1": ["recall_at_1"], "none": []}[retrieval]
    return names + (paper_order_names(k) if retrieval == "ranked" and dense else [])


def metric_names(k: int) -> list[str]:
    """The metrics a run logs for MRR@k (the paper-order ones only where a method kept dense scores)."""
    return question_metric_names(k) + paper_order_names(k)


def paper_order(ranked: Sequence[str], dense: Sequence[float | None]) -> list[str]:
    """The T²-RAGBench authors' evaluation order: the retrieved documents re-sorted by their stored
    dense similarity, best first; a document the dense retriever did not return (BM25-only)
    scores 0; ties keep the retrieved order. A comparability aid, not a quality measure: for
    hybrid and reranker it measures the dense order inside the retrieved set."""
    scored = [0.0 if d is None else float(d) for d in dense]
    order = sorted(range(len(ranked)), key=lambda i: -scored[i])
    return [ranked[i] for i in order]


def metric_label(name: str) -> str:
    """``mrr_at_3`` → ``MRR@3``, ``recall_at_5`` → ``R@5``, ``nm`` → ``NM``, ``nm_bare`` → ``NM-bare``."""
    if name.endswith(PAPER_ORDER):
        return metric_label(name[: -len(PAPER_ORDER)]) + " (paper order)"
    m = RANK_METRIC.match(name)
    if m:
        return f"{'MRR' if m.group(1) == 'mrr' else 'R'}@{m.group(2)}"
    return _LABELS.get(name, name)


def reciprocal_rank(ranked: Sequence[str], gold: str, k: int) -> float:
    for i, cid in enumerate(ranked[:k]):
        if cid == gold:
            return 1.0 / (i + 1)
    return 0.0


def recall_at(ranked: Sequence[str], gold: str, k: int) -> float:
    return 1.0 if gold in list(ranked[:k]) else 0.0


def question_metrics(
    ranked: Sequence[str] | None,
    gold_context: str,
    k: int,
    pred: float | None,
    gold: float | None,
    pred_text: object = None,
    dense: Sequence[float | None] | None = None,
    ranked_depth: int | None = None,
) -> dict[str, float | None]:
    """Per-question metric values (0/1 or reciprocal rank); ``None`` where not applicable.

    ``pred`` is the parsed answer number, ``pred_text`` the model's answer string
    (:func:`t2exp.answering.answers.answer_text`; ``pred`` itself when not given) that ``nm_bare`` reads
    with bare ``float()``. Every NM reading is ``None`` for a non-numeric gold (``gold is None``),
    so all three cover the same questions. ``degenerate`` is 1 for a degenerate prediction
    (:func:`t2exp.text.numbers.is_degenerate`), 0 otherwise, whatever the gold. ``dense``
    (aligned with ``ranked``: each document's dense similarity, ``None`` for BM25-only hits) adds
    the authors' re-sorted MRR@k and Recall@1 (:func:`paper_order` of the top k, the list their
    retriever returns); without it they are ``None``. ``ranked_depth``: how many documents the
    method ranked at most (``methods.Ranking.depth``); a Recall@r past it is ``None``.
    """
    text = pred if pred_text is None else pred_text
    out: dict[str, float | None] = {
        "nm": None if gold is None else float(number_match(pred, gold)),
        "nm_bare": None if gold is None else float(number_match_bare(text, gold)),
        "nm_strict": None if gold is None else float(number_match_strict(pred, gold)),
        DEGENERATE: float(is_degenerate(text, pred)),
    }
    if ranked is None:
        out[f"mrr_at_{k}"] = None
        for r in RECALL_KS:
            out[f"recall_at_{r}"] = None
    else:
        out[f"mrr_at_{k}"] = reciprocal_rank(ranked, gold_context, k)
        for r in RECALL_KS:
            out[f"recall_at_{r}"] = None if ranked_depth is not None and r > ranked_depth else recall_at(ranked, gold_context, r)
    mrr_paper, r1_paper = paper_order_names(k)
    if ranked is not None and dense is not None and len(dense) == len(ranked):
        resorted = paper_order(ranked[:k], dense[:k])
        out[mrr_paper], out[r1_paper] = reciprocal_rank(resorted, gold_context, k), recall_at(resorted, gold_context, 1)
    else:
        out[mrr_paper] = out[r1_paper] = None
    return out


def question_value(row: Mapping[str, object], metric: str) -> float | None:
    """The value of ``metric`` for one row of a run's ``predictions.jsonl``: the logged value, or a
    rank metric the run did not log (another k) from its ranked ``retrieved`` ids; None where
    undefined (no ranking, or the gold might sit below the logged depth)."""
    v = row.get(metric)
    if v is not None:
        return float(v)  # type: ignore[arg-type]
    m = RANK_METRIC.match(metric)
    ranked, gold = row.get("retrieved"), row.get("context_id")
    if m is None or ranked is None or gold is None:
        return None
    cut, ranked = int(m.group(2)), [str(x) for x in ranked]  # type: ignore[attr-defined]
    if cut > len(ranked) and gold not in ranked:
        return None
    return reciprocal_rank(ranked, str(gold), cut) if m.group(1) == "mrr" else recall_at(ranked, str(gold), cut)


@dataclass(frozen=True)
class MetricValue:
    mean: float  # in percent
    n: int
    ci_low: float | None = None
    ci_high: float | None = None


def bootstrap_ci(values: Sequence[float], n_boot: int = N_BOOT, seed: int = CI_SEED, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, in percent."""
    # not scipy.stats.bootstrap: it draws the same resamples but its percentiles differ from these
    # in the last bits, and logged CIs must stay reproducible (tests/evaluation/test_metrics.py checks both)
    arr = np.asarray(values, dtype=float) * 100.0
    if arr.size == 0:
        return (float("nan"), float("nan"))
    return percentile_ci(arr, n_boot, seed, level)


def aggregate(
    rows: Iterable[Mapping[str, object]],
    metric_names: Sequence[str],
    *,
    ci: bool = False,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
) -> dict[str, dict[str, MetricValue]]:
    """Per-subset means (in percent) plus ``avg``: the question-weighted average over subsets.

    ``rows`` carry ``subset`` and the metric names; ``None`` values are not counted.
    """
    per: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        subset = str(row["subset"])
        for name in metric_names:
            v = row.get(name)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            per.setdefault(subset, {}).setdefault(name, []).append(float(cast(SupportsFloat, v)))
    result: dict[str, dict[str, MetricValue]] = {}
    for subset, metrics in sorted(per.items()):
        result[subset] = {}
        for name, vals in metrics.items():
            lo, hi = bootstrap_ci(vals, n_boot, seed) if ci else (None, None)
            result[subset][name] = MetricValue(100.0 * sum(vals) / len(vals), len(vals), lo, hi)
    if result:
        avg: dict[str, MetricValue] = {}
        for name in metric_names:
            parts = [result[s][name] for s in result if name in result[s]]
            total = sum(p.n for p in parts)
            if total == 0:
                continue
            mean = sum(p.mean * p.n for p in parts) / total
            lo = hi = None
            if ci:
                pooled = [v for s in per for v in per[s].get(name, [])]
                lo, hi = bootstrap_ci(pooled, n_boot, seed)
            avg[name] = MetricValue(mean, total, lo, hi)
        result["avg"] = avg
    return result


def degenerate_counts(rows: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """``{subset: n}`` degenerate predictions (rows whose ``degenerate`` is 1), every subset that
    has a row with a ``degenerate`` value, sorted."""
    out: dict[str, int] = {}
    for row in rows:
        v = row.get(DEGENERATE)
        if v is None:
            continue
        subset = str(row["subset"])
        out[subset] = out.get(subset, 0) + int(bool(v))
    return dict(sorted(out.items()))


def flatten_table(table: Mapping[str, Mapping[str, MetricValue]]) -> dict[str, float]:
    """``{subset: {metric: MetricValue}}`` → ``{"<subset>/<metric>": mean, ..._ci_low, ..._ci_high}``."""
    out: dict[str, float] = {}
    for subset, values in table.items():
        for name, mv in values.items():
            out[f"{subset}/{name}"] = mv.mean
            if mv.ci_low is not None and mv.ci_high is not None:
                out[f"{subset}/{name}_ci_low"] = mv.ci_low
                out[f"{subset}/{name}_ci_high"] = mv.ci_high
    return out


# The MLflow runs table orders metric columns by key (the UI sorts the keys as strings: digits,
# then upper case, then lower case), so FinQA's fifteen metrics and CIs come before TAT-DQA's and
# avg's. A run also logs its headline numbers under the same names with this prefix: they sort
# first, as the table's first columns (and a chart section of their own).
HEADLINE_PREFIX = "0_"


def headline_metrics(metrics: Mapping[str, float], k: int) -> dict[str, float]:
    """The headline copies of a run's flat metrics: per subset and ``avg``, NM and MRR@k
    (``0_TAT-DQA/mrr_at_3`` = ``TAT-DQA/mrr_at_3``), for those the run has."""
    wanted = ("nm", f"mrr_at_{k}")
    return {
        f"{HEADLINE_PREFIX}{key}": v
        for key, v in metrics.items()
        if "/" in key and key.partition("/")[2] in wanted and not key.startswith(HEADLINE_PREFIX)
    }


def is_headline(name: str) -> bool:
    return name.startswith(HEADLINE_PREFIX)
