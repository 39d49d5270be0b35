"""Paired comparison of two runs, question by question (``t2exp compare RUN_A RUN_B`` is
:mod:`t2exp.cli.compare`; :func:`compare_runs` is the Python API).

Both runs' ``predictions.jsonl`` artifacts are downloaded from MLflow (a path to a predictions
file works too) and paired by (subset, question id); only questions present in both, with a value
for the metric in both, are compared, and the dropped ones are counted. Per subset and over all
paired questions (question-weighted, like ``avg``) it prints mean A, mean B, the difference A - B
with a paired bootstrap 95 % CI and the two-sided paired permutation (sign-flip) p-value
(:mod:`t2exp.evaluation.stats`). Values are in percent.

Metrics: ``nm``, ``nm_bare``, ``nm_strict``, ``mrr_at_<k>``, ``recall_at_<r>``. A retrieval metric that a run did not log for
its own k (``mrr_at_5`` of a k=3 run) is recomputed from the ranked ``retrieved`` ids when their
depth allows it. ``--metric auto`` (default) is ``nm`` when both runs have NM values, else the
MRR@k of run A.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2exp.data.loader import read_jsonl_objects
from t2exp.errors import T2ExpError
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import NM_METRICS, RANK_METRIC, question_value
from t2exp.evaluation.questions import index_by_question
from t2exp.evaluation.stats import CI_SEED, N_BOOT, paired_bootstrap, permutation_test
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
        return read_jsonl_objects(Path(path))


def load_source(client: Callable[[], Any], source: str) -> list[dict[str, Any]]:
    """A path to a predictions file, or a run id (``client()`` gives the MLflow client)."""
    if Path(source).is_file():
        return read_jsonl_objects(Path(source))
    if os.sep in source or source.endswith((".jsonl", ".json")):  # a path, not a run id: no MLflow store is opened
        raise CompareError(f"{source}: no such file (give a predictions.jsonl path or an MLflow run id)")
    return load_run_predictions(client(), source)


# --- per-question values (the evaluator's question_value) ----------------------------------------


def default_metric(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> str:
    if any(r.get("nm") is not None for r in rows_a) and any(r.get("nm") is not None for r in rows_b):
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
    duplicates: int = 0

    @property
    def n(self) -> int:
        return sum(len(a) for a, _ in self.values.values())

    @property
    def dropped(self) -> int:
        return self.only_a + self.only_b + self.missing_value


def _index(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[tuple[str, str], Mapping[str, Any]], int]:
    return index_by_question(rows)  # a resumed run may repeat a question: the last row wins


def pair_predictions(rows_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]], metric: str) -> Paired:
    ia, dup_a = _index(rows_a)
    ib, dup_b = _index(rows_b)
    p = Paired(duplicates=dup_a + dup_b)
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
        subset, boot.n, 100 * boot.mean_a, 100 * boot.mean_b, 100 * boot.diff,
        100 * boot.ci_low, 100 * boot.ci_high, perm.p_value, perm.exact,
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
    body = [[r.subset, str(r.n), tabular.value(r.mean_a), tabular.value(r.mean_b),
             tabular.value(r.diff, r.ci_low, r.ci_high, signed=True), format_p(r.p_value)] for r in rows]
    title = f"metric: {metric} (percent); diff = A - B; paired bootstrap CI, sign-flip permutation p"
    return title + "\n" + tabular.aligned(head, body)


@dataclass
class Comparison:
    """Two runs compared on one metric: per-subset and overall rows, and what was left out."""

    metric: str
    paired: Paired
    rows: list[ComparisonRow]

    @property
    def dropped(self) -> dict[str, int]:
        p = self.paired
        return {"only_in_a": p.only_a, "only_in_b": p.only_b, "missing_value": p.missing_value, "duplicate_rows": p.duplicates}


def compare_runs(run_a: str, run_b: str, metric: str = "auto", *, n_boot: int = N_BOOT, seed: int = CI_SEED,
                 tracking_uri: str | None = None) -> Comparison:
    """Compare two runs (MLflow run ids, or paths of ``predictions.jsonl`` files) question by
    question on ``metric`` (``auto``: nm when both have it, else run A's MRR@k). Raises
    :class:`CompareError` with one line when they cannot be compared."""
    if n_boot < 1:
        raise CompareError("--n-boot must be >= 1")
    clients: list[Any] = []

    def client() -> Any:  # only a run id needs MLflow
        if not clients:
            from mlflow.tracking import MlflowClient

            clients.append(MlflowClient(tracking_uri=tracking_uri or default_tracking_uri()))
        return clients[0]

    rows_a = load_source(client, run_a)
    rows_b = load_source(client, run_b)
    metric = default_metric(rows_a, rows_b) if metric == "auto" else metric
    if metric not in NM_METRICS and RANK_METRIC.match(metric) is None:
        raise CompareError(f"--metric={metric!r}: allowed {', '.join(NM_METRICS)}, mrr_at_<k>, recall_at_<r>, auto")
    paired = pair_predictions(rows_a, rows_b, metric)
    if paired.n == 0:
        raise CompareError(
            f"no question has a {metric!r} value in both runs ({paired.only_a} only in A, {paired.only_b} only in B, "
            f"{paired.missing_value} without a value; retrieval-only runs have no nm: try --metric mrr_at_3)"
        )
    return Comparison(metric, paired, compare(paired, n_boot=n_boot, seed=seed))
