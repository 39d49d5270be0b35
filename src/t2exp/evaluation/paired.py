"""The one comparison engine: runs compared question by question (:func:`compare_pairs`, its result
:class:`Comparisons`); ``t2exp compare`` and the report's Δ columns, all-pairs table and ladder are views of it.

Rows (a repeated question dropped, the first kept) are paired by (subset, question id); only
questions with a metric value in both (:func:`~t2exp.evaluation.metrics.question_value`) count, the
dropped ones are counted. Per subset and overall, in percent: both means, A - B with a paired
bootstrap 95 % CI, the sign-flip p (:mod:`t2exp.evaluation.stats`), Holm-corrected over the pairs,
and the questions that differ by effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from t2exp.config.checks import METRIC
from t2exp.config.schema import Config
from t2exp.errors import T2ExpError
from t2exp.evaluation.metrics import question_value
from t2exp.evaluation.questions import QuestionDiff, QuestionKey, by_effect, index_by_question, question_differences, question_record
from t2exp.evaluation.scoring.predictions import logged_rows, read_predictions
from t2exp.evaluation.stats import CI_SEED, N_BOOT, holm, paired_bootstrap, permutation_test
from t2exp.infra.mlflow_store import run_artifact

OVERALL = "overall"
OTHER_QUESTIONS = "other questions"  # why a pair that must share its questions was not compared
NO_PREDICTIONS = "no predictions"

Rows = Sequence[Mapping[str, Any]]


class CompareError(T2ExpError):
    pass


def load_run_predictions(client: Any, run_id: str) -> list[dict[str, Any]]:
    """The ``predictions.jsonl`` artifact of an MLflow run."""
    with run_artifact(client, run_id, "predictions.jsonl") as path:
        return read_logged(path, f"run {run_id}: predictions.jsonl")


def read_logged(path: Path, label: str | None = None) -> list[dict[str, Any]]:
    """A run's prediction rows from ``path`` (:func:`scoring.predictions.logged_rows`: the reader
    of ``t2exp score``, each row checked); errors name ``label`` (default: the path) and the line."""
    rows, source, where = read_predictions(path)
    return logged_rows(rows, label or source, where)


@dataclass
class Paired:
    """Per-subset paired values plus what was dropped."""

    values: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    only_a: int = 0
    only_b: int = 0
    missing_value: int = 0  # in both runs, but the metric is undefined in one of them
    duplicate_ids: list[str] = field(default_factory=list)  # rows repeating a question of their run: the first is kept

    @property
    def duplicates(self) -> int:
        return len(self.duplicate_ids)

    @property
    def n(self) -> int:
        return sum(len(a) for a, _ in self.values.values())

    @property
    def dropped(self) -> int:
        return self.only_a + self.only_b + self.missing_value


def _index(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[QuestionKey, Mapping[str, Any]], list[str]]:
    """Rows by question (:func:`index_by_question`: a repeated one keeps its first row, as ``t2exp
    score`` does) and the ids of the repeats."""
    first, repeated = index_by_question(rows)
    return first, [str(r["id"]) for r in repeated]


def pair_predictions(rows_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]], metric: str) -> Paired:
    ia, dup_a = _index(rows_a)
    ib, dup_b = _index(rows_b)
    p = Paired(duplicate_ids=dup_a + dup_b)
    p.only_a = len(ia.keys() - ib.keys())
    p.only_b = len(ib.keys() - ia.keys())
    for key in sorted(ia.keys() & ib.keys()):
        va, vb = question_value(ia[key], metric), question_value(ib[key], metric)
        if va is None or vb is None:
            p.missing_value += 1
            continue
        xs, ys = p.values.setdefault(key[0], ([], []))
        xs.append(va)
        ys.append(vb)
    return p


@dataclass(frozen=True)
class ComparisonRow:
    subset: str
    n: int
    mean_a: float  # percent
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    exact: bool


def compare_values(subset: str, a: Sequence[float], b: Sequence[float], n_boot: int, seed: int) -> ComparisonRow:
    boot = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
    perm = permutation_test(a, b, n_perm=n_boot, seed=seed)
    return ComparisonRow(
        subset,
        boot.n,
        100 * boot.mean_a,
        100 * boot.mean_b,
        100 * boot.diff,
        100 * boot.ci_low,
        100 * boot.ci_high,
        perm.p_value,
        perm.exact,
    )


def compare(paired: Paired, n_boot: int = N_BOOT, seed: int = CI_SEED, *, by_subset: bool = True) -> list[ComparisonRow]:
    """One row per subset (sorted; not with ``by_subset=False``) plus ``overall`` over every paired question."""
    rows = [compare_values(s, a, b, n_boot, seed) for s, (a, b) in sorted(paired.values.items())] if by_subset else []
    all_a = [v for a, _ in paired.values.values() for v in a]
    all_b = [v for _, b in paired.values.values() for v in b]
    if all_a:
        rows.append(compare_values(OVERALL, all_a, all_b, n_boot, seed))
    return rows


@dataclass(frozen=True)
class Delta:
    """A pair's difference over all its questions, as a Δ column shows it."""

    diff: float
    low: float
    high: float
    p: float
    n: int
    p_holm: float  # Holm-adjusted over the pairs compared (stats.holm)


@dataclass
class Comparison:
    """Run ``a`` against run ``b`` on one metric: per-subset and overall rows, each p Holm-adjusted
    over the pairs compared with it (``p_holm``, per subset row), what was left out, and the
    questions on which they differ (sorted by effect: A's wins, then its losses)."""

    metric: str
    paired: Paired
    rows: list[ComparisonRow]
    questions: list[QuestionDiff] = field(default_factory=list)
    p_holm: dict[str, float] = field(default_factory=dict)  # subset row -> adjusted p
    a: str = "A"
    b: str = "B"

    @property
    def wins(self) -> int:
        """Paired questions on which A has the higher value."""
        return sum(1 for q in self.questions if (q.diff or 0) > 0)

    @property
    def losses(self) -> int:
        return sum(1 for q in self.questions if (q.diff or 0) < 0)

    @property
    def ties(self) -> int:
        return self.paired.n - self.wins - self.losses

    @property
    def delta(self) -> Delta:
        """The overall row as a Δ column reads it."""
        return self.deltas()[self.rows[-1].subset]

    def deltas(self) -> dict[str, Delta]:
        """Each row (each subset's, then ``overall``) as a Δ column reads it."""
        return {r.subset: Delta(r.diff, r.ci_low, r.ci_high, r.p_value, r.n, self.p_holm[r.subset]) for r in self.rows}

    @property
    def dropped(self) -> dict[str, int]:
        p = self.paired
        return {"only_in_a": p.only_a, "only_in_b": p.only_b, "missing_value": p.missing_value, "duplicate_rows": p.duplicates}

    first_columns: ClassVar[tuple[str, ...]] = ()  # the columns of records() before a question record's

    def records(self) -> list[dict[str, Any]]:
        """Every question that differs, by effect (:func:`~t2exp.evaluation.questions.question_record`)."""
        return [question_record(q) for q in self.questions]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON data: its rows, what was dropped, the counts and every differing
        question (:func:`~t2exp.evaluation.questions.question_record`)."""
        return {
            "metric": self.metric,
            "paired": self.paired.n,
            "dropped": self.dropped,
            "rows": [r.__dict__ for r in self.rows],
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "questions": self.records(),
        }

    @property
    def notes(self) -> list[str]:
        """What a reader of the comparison must know, one line each."""
        ids = self.paired.duplicate_ids
        if not ids:
            return []
        shown = ", ".join(repr(i) for i in ids[:5]) + (f", … ({len(ids) - 5} more)" if len(ids) > 5 else "")
        return [
            f"{len(ids)} rows repeat a question already seen in their run; the first row of each is kept (as t2exp score does): {shown}"
        ]


@dataclass
class Comparisons:
    """Pairs of runs compared on one metric (:func:`compare_pairs`): those compared, in the order
    asked, and why each other one was not (``(a, b, why)``)."""

    metric: str
    pairs: list[Comparison]
    refused: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def m(self) -> int:
        """How many comparisons the Holm correction is over."""
        return len(self.pairs)

    def count(self, why: str) -> int:
        return sum(1 for *_, w in self.refused if w == why)


def valued_metrics(rows: Rows) -> list[str]:
    """The metrics (names of the grammar) that some row gives a value."""
    return sorted({key for r in rows for key, v in r.items() if v is not None and METRIC.match(key)})


def _no_value(paired: Paired, metric: str, rows_a: Rows, rows_b: Rows) -> str:
    hint = f"; retrieval-only runs have no nm: try --metric mrr_at_{Config.k}" if metric.startswith("nm") and paired.missing_value else ""
    has = [", ".join(valued_metrics(rows)) or "none" for rows in (rows_a, rows_b)]
    return (
        f"no question has a {metric!r} value in both runs ({paired.only_a} only in A, {paired.only_b} only in B, "
        f"{paired.missing_value} without a value{hint}; A has {has[0]}; B has {has[1]})"
    )


def compare_pairs(
    rows: Callable[[str], Rows | None],
    pairs: Iterable[tuple[str, str]],
    metric: str,
    *,
    by_subset: bool = True,
    same_questions: bool = False,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
) -> Comparisons:
    """Run A against run B for each ``(a, b)`` of ``pairs`` (``rows(key)``: a run's prediction rows,
    None without any) on ``metric``: its rows (per subset unless ``by_subset`` is False, and overall)
    and its differing questions; then every p Holm-corrected, per subset row, over the pairs that
    have that row. A pair with no question valued in both, or (``same_questions``) asked other
    questions, is refused with the reason."""
    out = Comparisons(metric, [])
    for a, b in pairs:
        rows_a, rows_b = rows(a), rows(b)
        if rows_a is None or rows_b is None:
            out.refused.append((a, b, NO_PREDICTIONS))
            continue
        paired = pair_predictions(rows_a, rows_b, metric)
        if same_questions and (paired.only_a or paired.only_b):
            out.refused.append((a, b, OTHER_QUESTIONS))
        elif paired.n == 0:
            out.refused.append((a, b, _no_value(paired, metric, rows_a, rows_b)))
        else:
            result = compare(paired, n_boot, seed, by_subset=by_subset)
            out.pairs.append(Comparison(metric, paired, result, by_effect(question_differences(rows_a, rows_b, metric)), a=a, b=b))
    for subset in dict.fromkeys(r.subset for c in out.pairs for r in c.rows):
        having = [(c, r.p_value) for c in out.pairs for r in c.rows if r.subset == subset]
        for (c, _), adjusted in zip(having, holm([p for _, p in having]), strict=True):
            c.p_holm[subset] = adjusted
    return out
