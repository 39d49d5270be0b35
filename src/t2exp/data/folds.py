"""Seeded k-fold splits of a subset's questions, for tuning on some questions and reporting on
others (``dataset.folds``, ``dataset.fold``, ``dataset.fold_role``, ``dataset.fold_seed``).

A question's fold depends only on the seed, its subset, its id and the set of ids it is split with:
the ids are ordered by ``sha256(seed, subset, id)`` and dealt round-robin into ``folds`` folds, so
folds are disjoint, cover every question, differ in size by at most one, and do not move when the
rows are read in another order. The corpus is never split: every fold retrieves over the whole
subset corpus (so every fold and role reuses the same index).

``role=eval`` keeps the questions of fold ``fold`` (the held-out questions a result is reported
on); ``role=tune`` keeps all the others (the questions a parameter is chosen on).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, TypeVar

ROLES = ("eval", "tune")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


Q = TypeVar("Q", bound=_HasId)


def _rank_key(seed: int, subset: str, qid: str) -> str:
    return hashlib.sha256(f"{seed}\0{subset}\0{qid}".encode()).hexdigest()


def assign_folds(ids: Sequence[str], subset: str, folds: int, seed: int = 0) -> dict[str, int]:
    """The fold (0 .. folds-1) of every id."""
    order = sorted(set(ids), key=lambda qid: _rank_key(seed, subset, qid))
    return {qid: i % folds for i, qid in enumerate(order)}


def select_fold(questions: list[Q], subset: str, folds: int | None, fold: int | None, role: str = "eval", seed: int = 0) -> list[Q]:
    """The questions of ``fold`` (``role=eval``) or of every other fold (``role=tune``), in their
    original order; all of them when ``folds`` is ``None``. Questions need an ``id``."""
    if not folds:
        return questions
    assert fold is not None and 0 <= fold < folds and role in ROLES, "checked by the config schema (DatasetConfig)"
    of = assign_folds([q.id for q in questions], subset, folds, seed)
    keep_eval = role == "eval"
    return [q for q in questions if (of[q.id] == fold) == keep_eval]


def describe(folds: int | None, fold: int | None, role: str, seed: int) -> str:
    """``fold 0 of 5 (seed 0)`` / ``folds != 0 of 5 (seed 0)`` / ``all questions``: what a run's
    questions are, for reports and tags."""
    if not folds:
        return "all questions"
    which = f"fold {fold}" if role == "eval" else f"folds != {fold}"
    return f"{which} of {folds} (fold_seed {seed})"
