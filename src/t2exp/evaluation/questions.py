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
from dataclasses import dataclass
from typing import Any

from t2exp.evaluation.metrics import question_value
from t2exp.evaluation.scoring.predictions import first_of_each

QuestionKey = tuple[str, str]


def question_key(row: Mapping[str, Any]) -> QuestionKey:
    """``(subset, id)`` of a prediction row."""
    return (str(row.get("subset", "")), str(row["id"]))


def index_by_question(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[QuestionKey, Mapping[str, Any]], int]:
    """Each question's first row (the one rule, :func:`first_of_each`), in first-seen order, and how
    many repeated rows were dropped."""
    first, repeated = first_of_each((question_key(r), r) for r in rows)
    return first, len(repeated)


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

    @property
    def diff(self) -> float | None:
        return None if self.a is None or self.b is None else self.a - self.b


def question_differences(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str, *,
                         changed_only: bool = True) -> list[QuestionDiff]:
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
        out.append(QuestionDiff(key[0], key[1], None if text is None else str(text), va, vb, ra is not None, rb is not None))
    return out
