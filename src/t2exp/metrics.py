"""Pure scoring functions: number extraction, Number Match, MRR@k, Recall@k, aggregation.

Number Match follows T²-RAGBench (Strich et al., §3): absolute values are compared; a prediction
is correct when both are below ``eps`` or when the ratio, shifted by its nearest power of ten,
is within ``eps`` of 1. A prediction without a number is wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

EPS = 1e-2

_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_BOXED_RE = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_MARKER_RE = re.compile(
    r"(?:final\s+answer|answer\s+is|answer)\s*(?:is)?\s*[:=]?",
    re.IGNORECASE,
)
_SCALES = {
    "thousand": 1e3,
    "thousands": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "mm": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "trillions": 1e12,
    "tn": 1e12,
}
# One number as written in financial prose: optional sign or opening parenthesis, optional
# currency, digits with optional thousands separators, decimals, exponent, closing
# parenthesis, percent sign and a scale word.
_NUMBER_RE = re.compile(
    r"""
    (?P<open>\()?\s*
    (?P<sign>[-+\u2212\u2013])?\s*
    (?:(?:US)?\$|USD\s?|EUR\s?|GBP\s?|[€£¥])?\s*
    (?P<sign2>[-+\u2212\u2013])?
    (?P<num>
        \d{1,3}(?:,\d{3})+(?:\.\d+)?     # 1,234,567.89
      | \d+(?:\.\d+)?                    # 1234.5
      | \.\d+                            # .5
    )
    (?P<exp>[eE][-+]?\d+)?
    (?P<close>\s*\))?
    \s*(?P<pct>%|percent\b|per\s+cent\b)?
    \s*(?P<scale>(?:thousands?|millions?|billions?|trillions?|bn|mn|mm|tn|k|m|b)\b)?
    \s*(?P<close2>\))?
    """,
    re.VERBOSE | re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedNumber:
    value: float
    text: str


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (an unterminated block runs to the end)."""
    return _THINK_RE.sub(" ", text)


def _numbers(text: str) -> list[ParsedNumber]:
    out: list[ParsedNumber] = []
    for m in _NUMBER_RE.finditer(text):
        raw = m.group("num").replace(",", "")
        try:
            value = float(raw + (m.group("exp") or ""))
        except ValueError:  # pragma: no cover - regex guarantees digits
            continue
        if not math.isfinite(value):
            continue
        negative = False
        if m.group("sign") in ("-", "\u2212", "\u2013") or m.group("sign2") in ("-", "\u2212", "\u2013"):
            negative = True
        if m.group("open") and (m.group("close") or m.group("close2")):
            negative = True
        scale = m.group("scale")
        if scale and not m.group("pct"):
            factor = _SCALES.get(scale.lower())
            # single letters only count as scales right after a currency amount ("$5m")
            if factor and (len(scale) > 1 or "$" in m.group(0) or "€" in m.group(0) or "£" in m.group(0)):
                value *= factor
        if negative:
            value = -value
        out.append(ParsedNumber(value=value, text=m.group(0).strip()))
    return out


def extract_number(text: str | None) -> float | None:
    """Pull the answer number out of a generated text; ``None`` when there is none.

    Order of preference: ``\\boxed{...}``; the first number after the last
    "Final answer:"/"Answer:" marker; otherwise the first number of the last line that has one.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        try:
            value = float(text)
        except (TypeError, ValueError):
            return None
        return value if math.isfinite(value) else None
    text = strip_reasoning(text)
    boxed = _BOXED_RE.findall(text)
    for candidate in reversed(boxed):
        nums = _numbers(candidate)
        if nums:
            return nums[0].value
    markers = list(_MARKER_RE.finditer(text))
    if markers:
        nums = _numbers(text[markers[-1].end():])
        if nums:
            return nums[0].value
    for line in reversed(text.splitlines()):
        nums = _numbers(line)
        if nums:
            return nums[0].value
    return None


def parse_gold(value: object) -> float | None:
    """Gold answers are strings holding a float (``program_answer``); anything else is None."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(float(value)) else None
    try:
        f = float(str(value).strip())
    except ValueError:
        return extract_number(str(value))
    return f if math.isfinite(f) else None


def number_match(pred: float | None, gold: float | None, eps: float = EPS) -> bool:
    """T²-RAGBench Number Match on absolute values, invariant to powers of ten."""
    if pred is None or gold is None:
        return False
    a_star, a = abs(float(pred)), abs(float(gold))
    if not (math.isfinite(a_star) and math.isfinite(a)):
        return False
    if a_star < eps and a < eps:
        return True
    if a_star == 0.0 or a == 0.0:
        return False
    # q = (a*/a) * 10^-round(log10(a*/a)), computed in log space so that no ratio over- or
    # underflows a float
    log_ratio = math.log10(a_star) - math.log10(a)
    q = 10.0 ** (log_ratio - round(log_ratio))
    return abs(q - 1.0) < eps


def reciprocal_rank(ranked: Sequence[str], gold: str, k: int) -> float:
    for i, cid in enumerate(ranked[:k]):
        if cid == gold:
            return 1.0 / (i + 1)
    return 0.0


def recall_at(ranked: Sequence[str], gold: str, k: int) -> float:
    return 1.0 if gold in list(ranked[:k]) else 0.0


RECALL_KS = (1, 3, 5)


def question_metrics(
    ranked: Sequence[str] | None, gold_context: str, k: int, pred: float | None, gold: float | None
) -> dict[str, float | None]:
    """Per-question metric values (0/1 or reciprocal rank); ``None`` where not applicable."""
    out: dict[str, float | None] = {"nm": None if gold is None else float(number_match(pred, gold))}
    if ranked is None:
        out[f"mrr_at_{k}"] = None
        for r in RECALL_KS:
            out[f"recall_at_{r}"] = None
    else:
        out[f"mrr_at_{k}"] = reciprocal_rank(ranked, gold_context, k)
        for r in RECALL_KS:
            out[f"recall_at_{r}"] = recall_at(ranked, gold_context, r)
    return out


@dataclass(frozen=True)
class MetricValue:
    mean: float  # in percent
    n: int
    ci_low: float | None = None
    ci_high: float | None = None


def bootstrap_ci(values: Sequence[float], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    means = arr[idx].mean(axis=1) * 100.0
    lo, hi = np.percentile(means, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def aggregate(
    rows: Iterable[Mapping[str, object]],
    metric_names: Sequence[str],
    *,
    ci: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
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
            per.setdefault(subset, {}).setdefault(name, []).append(float(v))
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


def flatten_table(table: Mapping[str, Mapping[str, MetricValue]]) -> dict[str, float]:
    """``{subset: {metric: MetricValue}}`` → ``{"<subset>/<metric>": mean, ..._ci_low, ..._ci_high}``."""
    out: dict[str, float] = {}
    for subset, values in table.items():
        for name, mv in values.items():
            out[f"{subset}/{name}"] = mv.mean
            if mv.ci_low is not None:
                out[f"{subset}/{name}_ci_low"] = mv.ci_low
                out[f"{subset}/{name}_ci_high"] = mv.ci_high
    return out
