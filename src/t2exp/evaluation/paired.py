"""Paired comparison of two runs, question by question (``t2exp compare RUN_A RUN_B`` is
:mod:`t2exp.cli.compare`; :func:`compare_runs` is the Python API).

Both runs' ``predictions.jsonl`` artifacts are downloaded from MLflow (a path to a predictions
file works too) and read as ``t2exp score`` reads them (:func:`read_logged`: each row needs an id,
metric values are numbers, a row repeating a question is dropped, the first kept), then paired by
(subset, question id); only questions present in both, with a value for the metric in both, are
compared, and the dropped ones are counted. Per subset and over all
paired questions (question-weighted, like ``avg``) it prints mean A, mean B, the difference A - B
with a paired bootstrap 95 % CI and the two-sided paired permutation (sign-flip) p-value
(:mod:`t2exp.evaluation.stats`). Values are in percent.

Metrics: ``nm``, ``nm_bare``, ``nm_strict``, ``mrr_at_<k>``, ``recall_at_<r>``. A retrieval metric that a run did not log for
its own k (``mrr_at_5`` of a k=3 run) is recomputed from the ranked ``retrieved`` ids when their
depth allows it. ``--metric auto`` (default) is ``nm`` when both runs have NM values, else the
MRR@k of run A.

Then the questions on which the two differ (:func:`t2exp.evaluation.questions.question_differences`
sorted by :func:`~t2exp.evaluation.questions.by_effect`: A's wins, then its losses, the largest
first), each with its gold answer and each run's answer, NM and gold rank
(:func:`~t2exp.evaluation.questions.question_record`); ``wins``/``losses``/``ties`` count them.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from t2exp.config.checks import METRIC, METRIC_NAMES
from t2exp.errors import T2ExpError
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import question_value
from t2exp.evaluation.questions import QuestionDiff, QuestionKey, by_effect, index_by_question, question_differences, question_record
from t2exp.evaluation.scoring.predictions import logged_rows, read_predictions
from t2exp.evaluation.stats import CI_SEED, N_BOOT, paired_bootstrap, permutation_test
from t2exp.infra.mlflow_store import open_for_reading
from t2exp.infra.paths import default_tracking_uri

OVERALL = "overall"


class CompareError(T2ExpError):
    pass


# --- loading ---------------------------------------------------------------------------------


def load_run_predictions(client: Any, run_id: str) -> list[dict[str, Any]]:
    """The ``predictions.jsonl`` artifact of an MLflow run."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, "predictions.jsonl", tmp)
        except Exception as exc:  # MLflow raises several types for a missing run/artifact
            raise CompareError(
                f"run {run_id}: cannot download predictions.jsonl ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            ) from None
        return read_logged(Path(path), f"run {run_id}: predictions.jsonl")


def read_logged(path: Path, label: str | None = None) -> list[dict[str, Any]]:
    """A run's prediction rows from ``path`` (:func:`scoring.predictions.logged_rows`: the reader
    of ``t2exp score``, each row checked); errors name ``label`` (default: the path) and the line."""
    rows, source, where = read_predictions(path)
    return logged_rows(rows, label or source, where)


def load_source(client: Callable[[], Any], source: str) -> list[dict[str, Any]]:
    """A path to a predictions file, or a run id (``client()`` gives the MLflow client); a file
    without rows is an error naming it."""
    if Path(source).is_file():
        rows, label = read_logged(Path(source)), source
    elif os.sep in source or source.endswith((".jsonl", ".json")):  # a path, not a run id: no MLflow store is opened
        raise CompareError(f"{source}: no such file (give a predictions.jsonl path or an MLflow run id)")
    else:
        rows, label = load_run_predictions(client(), source), f"run {source}: predictions.jsonl"
    if not rows:
        raise CompareError(f"{label}: the file is empty (no prediction rows); give the predictions.jsonl of a run")
    return rows


# --- per-question values (the evaluator's question_value) ----------------------------------------


def default_metric(rows_a: Sequence[Mapping[str, Any]], *others: Sequence[Mapping[str, Any]]) -> str:
    """``nm`` when every run given has NM values, else the MRR@k that run A logged."""
    if all(any(r.get("nm") is not None for r in rows) for rows in (rows_a, *others)):
        return "nm"
    for r in rows_a:
        for key in r:
            if key.startswith("mrr_at_"):
                return key
    return "mrr_at_3"


# --- pairing and comparison ---------------------------------------------------------------------


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


def compare(paired: Paired, n_boot: int = N_BOOT, seed: int = CI_SEED) -> list[ComparisonRow]:
    """One row per subset (sorted) plus ``overall`` over every paired question."""
    rows = [compare_values(s, a, b, n_boot, seed) for s, (a, b) in sorted(paired.values.items())]
    all_a = [v for a, _ in paired.values.values() for v in a]
    all_b = [v for _, b in paired.values.values() for v in b]
    if all_a:
        rows.append(compare_values(OVERALL, all_a, all_b, n_boot, seed))
    return rows


def format_p(p: float) -> str:
    if math.isnan(p):
        return "nan"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def p_text(p: float) -> str:
    """``p<0.001`` or ``p=0.042``: a p-value as a table cell shows it."""
    text = format_p(p)
    return "p" + (text if text.startswith("<") else f"={text}")


def format_table(rows: Sequence[ComparisonRow], metric: str, label_a: str = "A", label_b: str = "B") -> str:
    head = ["subset", "n", f"mean {label_a}", f"mean {label_b}", f"diff {label_a}-{label_b} [95% CI]", "p"]
    body = [
        [
            r.subset,
            str(r.n),
            tabular.value(r.mean_a),
            tabular.value(r.mean_b),
            tabular.value(r.diff, r.ci_low, r.ci_high, signed=True),
            format_p(r.p_value),
        ]
        for r in rows
    ]
    title = f"metric: {metric} (percent); diff = A - B; paired bootstrap CI, sign-flip permutation p"
    return title + "\n" + tabular.aligned(head, body)


@dataclass
class Comparison:
    """Two runs compared on one metric: per-subset and overall rows, what was left out, and the
    questions on which they differ (sorted by effect: A's wins, then its losses)."""

    metric: str
    paired: Paired
    rows: list[ComparisonRow]
    questions: list[QuestionDiff] = field(default_factory=list)

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


def compare_rows(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str, *, n_boot: int = N_BOOT, seed: int = CI_SEED
) -> Comparison:
    """Two runs' prediction rows compared on ``metric`` (a name of the grammar; not ``auto``)."""
    paired = pair_predictions(rows_a, rows_b, metric)
    if paired.n == 0:
        hint = "; retrieval-only runs have no nm: try --metric mrr_at_3" if metric.startswith("nm") and paired.missing_value else ""
        raise CompareError(
            f"no question has a {metric!r} value in both runs ({paired.only_a} only in A, {paired.only_b} only in B, "
            f"{paired.missing_value} without a value{hint})"
        )
    questions = by_effect(question_differences(rows_a, rows_b, metric))
    return Comparison(metric, paired, compare(paired, n_boot=n_boot, seed=seed), questions)


def check_metric(metric: str, n_boot: int) -> None:
    """``--metric`` and ``--n-boot`` checked before any file is read or store opened."""
    if n_boot < 1:
        raise CompareError("--n-boot must be >= 1")
    if metric != "auto" and METRIC.match(metric) is None:
        raise CompareError(f"--metric={metric!r} is invalid; allowed: {METRIC_NAMES}, auto")


def lazy_client(tracking_uri: str | None) -> Callable[[], Any]:
    """The MLflow client of ``tracking_uri``, opened on first use (only a run id needs one; a
    store that does not exist is not created: :func:`open_for_reading`)."""
    clients: list[Any] = []

    def client() -> Any:
        if not clients:
            clients.append(open_for_reading(tracking_uri or default_tracking_uri()))
        return clients[0]

    return client


def compare_runs(
    run_a: str, run_b: str, metric: str = "auto", *, n_boot: int = N_BOOT, seed: int = CI_SEED, tracking_uri: str | None = None
) -> Comparison:
    """Compare two runs (MLflow run ids, or paths of ``predictions.jsonl`` files) question by
    question on ``metric`` (``auto``: nm when both have it, else run A's MRR@k). Raises
    :class:`CompareError` with one line when they cannot be compared."""
    check_metric(metric, n_boot)
    client = lazy_client(tracking_uri)
    rows_a = load_source(client, run_a)
    rows_b = load_source(client, run_b)
    metric = default_metric(rows_a, rows_b) if metric == "auto" else metric
    return compare_rows(rows_a, rows_b, metric, n_boot=n_boot, seed=seed)
