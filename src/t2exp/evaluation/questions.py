"""Runs question by question: the key a prediction row is known by, the latest row per question,
and the per-question differences of two runs (what ``t2exp compare`` lists and what a run's
traces are selected by).

A question is ``(subset, id)``: ids are unique within a subset. A resumed run may repeat a
question in its ``predictions.jsonl``; the first row wins everywhere, as in ``t2exp score`` (the one
rule: :func:`t2exp.evaluation.scoring.predictions.first_of_each`; the pairing of
:mod:`t2exp.evaluation.paired`, a run's traces, the differences here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from t2exp.evaluation.metrics import question_value
from t2exp.evaluation.scoring.predictions import first_of_each

QuestionKey = tuple[str, str]


def question_key(row: Mapping[str, Any]) -> QuestionKey:
    """``(subset, id)`` of a prediction row."""
    return (str(row.get("subset", "")), str(row["id"]))


def index_by_question(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[QuestionKey, Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Each question's first row (the one rule, :func:`first_of_each`), in first-seen order, and the
    repeated rows that were dropped."""
    return first_of_each((question_key(r), r) for r in rows)


@dataclass(frozen=True)
class QuestionDiff:
    """One question of two runs: its value of the metric in each (None: not asked there, or the
    metric is undefined for it) and ``a - b`` where both have one."""

    subset: str
    id: str
    question: str | None
    a: float | None
    b: float | None
    in_a: bool
    in_b: bool
    row_a: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)  # each run's row of it
    row_b: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def diff(self) -> float | None:
        return None if self.a is None or self.b is None else self.a - self.b

    @property
    def effect(self) -> str:
        """``A better``, ``B better``, ``same``, or ``only in A|B`` / ``no value``."""
        if self.diff is None:
            return "only in A" if not self.in_b else "only in B" if not self.in_a else "no value"
        return "A better" if self.diff > 0 else "B better" if self.diff < 0 else "same"


def question_differences(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str, *, changed_only: bool = True
) -> list[QuestionDiff]:
    """The questions on which two runs differ in ``metric`` (the evaluator's
    :func:`t2exp.evaluation.metrics.question_value`), sorted by subset and id: both have a value
    and the values differ, or the question is in one run only (``in_a``/``in_b`` say which).
    ``changed_only=False``: every question of either run."""
    ia, _ = index_by_question(rows_a)
    ib, _ = index_by_question(rows_b)
    out = []
    for key in sorted(ia.keys() | ib.keys()):
        ra, rb = ia.get(key), ib.get(key)
        va = None if ra is None else question_value(ra, metric)
        vb = None if rb is None else question_value(rb, metric)
        if changed_only and ra is not None and rb is not None and va == vb:
            continue
        text = (ra or rb or {}).get("question")
        out.append(QuestionDiff(key[0], key[1], None if text is None else str(text), va, vb, ra is not None, rb is not None, ra, rb))
    return out


def by_effect(diffs: Iterable[QuestionDiff]) -> list[QuestionDiff]:
    """The questions on which both runs have a value and the values differ, sorted by effect: A's
    wins first (the largest ``a - b`` first), then its losses (the largest ``b - a`` first); equal
    effects by subset and id."""
    changed = [d for d in diffs if d.diff]
    wins = sorted((d for d in changed if (d.diff or 0) > 0), key=lambda d: (-(d.diff or 0), d.subset, d.id))
    losses = sorted((d for d in changed if (d.diff or 0) < 0), key=lambda d: (d.diff or 0, d.subset, d.id))
    return wins + losses


def gold_rank(row: Mapping[str, Any] | None) -> int | None:
    """Where the row's gold document ranked in its ``retrieved`` ids (1 = first; 0: not among them),
    from the evaluator's reciprocal rank over the whole ranking
    (:func:`t2exp.evaluation.metrics.question_value`); None for a row without a ranking."""
    if row is None or row.get("retrieved") is None or row.get("context_id") is None:
        return None
    ranked = list(row["retrieved"])
    if not ranked:
        return 0
    rr = question_value({"retrieved": ranked, "context_id": row["context_id"]}, f"mrr_at_{len(ranked)}")
    return round(1 / rr) if rr else 0


def answer_of(row: Mapping[str, Any] | None) -> Any:
    """The row's answer: the model's answer string, else its parsed number (None without either)."""
    if row is None:
        return None
    text = row.get("answer_text")
    return row.get("prediction") if text is None else text


def question_record(d: QuestionDiff) -> dict[str, Any]:
    """One question of two runs as a flat record (what ``t2exp compare`` lists and ``--out``
    writes): the effect, the question, its gold answer, each run's answer, NM and gold rank, and
    the metric's value in each and their difference (percent)."""
    row = d.row_a or d.row_b or {}
    gold = row.get("gold_raw", row.get("gold"))

    def pct(v: float | None) -> float | None:
        return None if v is None else 100 * v

    return {
        "effect": d.effect,
        "subset": d.subset,
        "id": d.id,
        "question": d.question,
        "gold": gold,
        "answer_a": answer_of(d.row_a),
        "nm_a": (d.row_a or {}).get("nm"),
        "gold_rank_a": gold_rank(d.row_a),
        "answer_b": answer_of(d.row_b),
        "nm_b": (d.row_b or {}).get("nm"),
        "gold_rank_b": gold_rank(d.row_b),
        "a": pct(d.a),
        "b": pct(d.b),
        "diff": pct(d.diff),
    }
