"""``t2exp compare``'s Python API (:func:`compare`, exported as ``t2exp.evaluation.compare``): two
runs (:func:`compare_runs`), or every cell of a sweep against a baseline cell
(:func:`compare_sweep`); both views of the one engine, :func:`t2exp.evaluation.paired.compare_pairs`.

Two runs: MLflow run ids (their ``predictions.jsonl`` artifacts are downloaded: a cell's, or the
one ``t2exp score --mlflow`` logs) or paths of predictions files; a file in ``t2exp score``'s
format that carries no metric values (any system's outputs: ``id``, ``prediction``, optional
``retrieved`` and ``subset``) is scored on the fly by the one scorer against the bundled data's
gold (:func:`scored_rows`). ``subsets`` (``--subset``) keeps the questions of those subsets.
Metrics: ``nm``, ``nm_bare``, ``nm_strict``, ``mrr_at_<k>``, ``recall_at_<r>``;
``--metric auto`` (default) is ``nm`` when both runs have NM values, else the MRR@k of run A.

A sweep: its parent run id (or an experiment name) is read as ``t2exp report`` reads it
(:func:`t2exp.evaluation.reporting.runs.resolve_target`: the FINISHED cells, the newest run of
each), the baseline is the cell ``--baseline`` names
(:func:`t2exp.evaluation.reporting.tables.select_baseline`: a run id or ``key=value`` overrides),
and each other cell is compared with it (A = the cell, B = the baseline), its p-values
Holm-corrected over the cells compared (per subset row).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from t2exp.config.checks import METRIC, METRIC_NAMES
from t2exp.config.schema import Config
from t2exp.evaluation import tabular
from t2exp.evaluation.paired import (
    CompareError,
    Comparison,
    ComparisonRow,
    compare_pairs,
    load_run_predictions,
    read_logged,
)
from t2exp.evaluation.reporting.runs import RunInfo, resolve_target
from t2exp.evaluation.reporting.tables import select_baseline
from t2exp.evaluation.stats import CI_SEED, N_BOOT, holm_header
from t2exp.infra.mlflow_store import open_client
from t2exp.infra.paths import default_tracking_uri


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
    return scored_rows(rows, source if Path(source).is_file() else rows, label)


def scored_rows(rows: list[dict[str, Any]], predictions: Any, label: str) -> list[dict[str, Any]]:
    """A run's rows as they are (they carry their metric values); rows that carry none (an outside
    system's file in ``t2exp score``'s format) scored by the one scorer
    (:func:`t2exp.evaluation.scoring.compute.score` of ``predictions``, the file or the rows)
    against every question of the bundled data, as ``t2exp score --limit none`` scores them."""
    if any(METRIC.match(key) for r in rows for key in r):
        return rows
    from t2exp.evaluation.scoring.compute import score

    scored = score(predictions, limit=None, n_boot=0).questions
    if not scored:
        raise CompareError(
            f"{label}: none of its question ids (e.g. {rows[0].get('id')!r}) is in the bundled data; score it against its "
            "dataset with `t2exp score FILE --dataset NAME --mlflow` and compare that run"
        )
    return scored


def only_subsets(runs: Sequence[Sequence[Mapping[str, Any]]], subsets: Sequence[str]) -> list[list[Mapping[str, Any]]]:
    """Each run's rows of ``subsets`` (``--subset``; all rows when none is named); a subset that no
    run has a question of is an error naming those they have."""
    if not subsets:
        return [list(rows) for rows in runs]
    there = sorted({str(r.get("subset", "")) for rows in runs for r in rows})
    for name in subsets:
        if name not in there:
            raise CompareError(f"--subset {name}: the runs compared have no question of that subset; their subsets: {', '.join(there)}")
    return [[r for r in rows if str(r.get("subset", "")) in subsets] for rows in runs]


def lazy_client(tracking_uri: str | None) -> Callable[[], Any]:
    """The MLflow client of ``tracking_uri``, opened on first use (only a run id needs one; a
    store that does not exist is not created)."""
    clients: list[Any] = []

    def client() -> Any:
        if not clients:
            clients.append(open_client(tracking_uri or default_tracking_uri(), "--tracking-uri", create=False))
        return clients[0]

    return client


def default_metric(rows_a: Sequence[Mapping[str, Any]], *others: Sequence[Mapping[str, Any]]) -> str:
    """``nm`` when every run given has NM values, else the MRR@k that run A logged."""
    if all(any(r.get("nm") is not None for r in rows) for rows in (rows_a, *others)):
        return "nm"
    for r in rows_a:
        for key in r:
            if key.startswith("mrr_at_"):
                return key
    return f"mrr_at_{Config.k}"


def check_metric(metric: str, n_boot: int) -> None:
    """``--metric`` and ``--n-boot`` checked before any file is read or store opened."""
    if n_boot < 1:
        raise CompareError("--n-boot must be >= 1")
    if metric != "auto" and METRIC.match(metric) is None:
        raise CompareError(f"--metric={metric!r} is invalid; allowed: {METRIC_NAMES}, auto")


def compare_rows(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str, *, n_boot: int = N_BOOT, seed: int = CI_SEED
) -> Comparison:
    """Two runs' prediction rows compared on ``metric`` (a name of the grammar; not ``auto``)."""
    result = compare_pairs({"A": rows_a, "B": rows_b}.get, [("A", "B")], metric, n_boot=n_boot, seed=seed)
    for *_, why in result.refused:
        raise CompareError(why)
    return result.pairs[0]


def compare_runs(
    run_a: str,
    run_b: str,
    metric: str = "auto",
    *,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
    tracking_uri: str | None = None,
    subsets: Sequence[str] = (),
) -> Comparison:
    """Compare two runs (MLflow run ids, or paths of predictions files) question by question on
    ``metric`` (``auto``: nm when both have it, else run A's MRR@k), on the questions of
    ``subsets`` (all when none is named). Raises :class:`CompareError` with one line when they
    cannot be compared."""
    check_metric(metric, n_boot)
    client = lazy_client(tracking_uri)
    rows_a, rows_b = only_subsets([load_source(client, run_a), load_source(client, run_b)], subsets)
    metric = default_metric(rows_a, rows_b) if metric == "auto" else metric
    return compare_rows(rows_a, rows_b, metric, n_boot=n_boot, seed=seed)


def format_table(rows: Sequence[ComparisonRow], metric: str, label_a: str = "A", label_b: str = "B") -> str:
    head = ["subset", "n", f"mean {label_a}", f"mean {label_b}", f"diff {label_a}-{label_b} [95% CI]", "p"]
    title = f"metric: {metric} (percent); diff = A - B; paired bootstrap CI, sign-flip permutation p"
    return title + "\n" + tabular.aligned(head, [[r.subset, *_row_cells(r)] for r in rows])


def _row_cells(r: ComparisonRow) -> list[str]:
    """A comparison row's n, both means, the difference with its CI and p, as the tables write them."""
    diff = tabular.value(r.diff, r.ci_low, r.ci_high, signed=True)
    return [str(r.n), tabular.value(r.mean_a), tabular.value(r.mean_b), diff, tabular.format_p(r.p_value)]


@dataclass
class CellComparison:
    """One cell against the baseline; its p-values are Holm-adjusted over the sweep's cells."""

    run: RunInfo
    comparison: Comparison

    @property
    def p_holm(self) -> dict[str, float]:
        """Subset row -> adjusted p."""
        return self.comparison.p_holm


@dataclass
class SweepComparison:
    title: str
    metric: str
    baseline: RunInfo
    cells: list[CellComparison]
    notes: list[str] = field(default_factory=list)

    first_columns: ClassVar[tuple[str, ...]] = ("cell", "cell_run_id")  # the columns of records() before a question record's

    @property
    def m(self) -> int:
        """How many comparisons the Holm correction is over."""
        return len(self.cells)

    def records(self) -> list[dict[str, Any]]:
        """Every differing question of every cell (A = the cell, B = the baseline), the cell first."""
        return [{"cell": c.run.name, "cell_run_id": c.run.run_id, **r} for c in self.cells for r in c.comparison.records()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "metric": self.metric,
            "baseline": {"run_id": self.baseline.run_id, "name": self.baseline.name},
            "holm_m": self.m,
            "notes": self.notes,
            "cells": [
                {
                    "run_id": c.run.run_id,
                    "name": c.run.name,
                    **c.comparison.to_dict(),
                    "rows": [{**r.__dict__, "p_holm": c.p_holm.get(r.subset)} for r in c.comparison.rows],
                }
                for c in self.cells
            ],
        }


def compare_sweep(
    target: str,
    baseline: str,
    metric: str = "auto",
    *,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
    tracking_uri: str | None = None,
    subsets: Sequence[str] = (),
) -> SweepComparison:
    """Every FINISHED cell of the sweep ``target`` (a parent run id, or an experiment name) against
    the cell ``baseline`` names, question by question on ``metric`` (``auto``: nm when every cell
    has it, else the baseline's MRR@k), on the questions of ``subsets`` (all when none is named);
    Holm-corrected over the cells."""
    check_metric(metric, n_boot)
    client = lazy_client(tracking_uri)()
    swept = resolve_target(client, target)
    base = select_baseline(swept.runs, baseline)
    others = {r.run_id: r for r in swept.runs if r.run_id != base.run_id}
    if not others:
        raise CompareError(f"{swept.title}: only the baseline {base.name!r} finished; no other cell to compare with it")
    ids = [r.run_id for r in swept.runs]
    rows = dict(zip(ids, only_subsets([load_run_predictions(client, r) for r in ids], subsets), strict=True))
    if metric == "auto":
        metric = default_metric(rows[base.run_id], *(rows[r] for r in others))
    result = compare_pairs(rows.get, [(r, base.run_id) for r in others], metric, n_boot=n_boot, seed=seed)
    refused = [(f"{others[a].name} ({a[:8]})", why) for a, _, why in result.refused]
    if not result.pairs:
        why = "; ".join(f"{who}: {why}" for who, why in refused)
        raise CompareError(f"{swept.title}: no cell could be compared with the baseline {base.name!r} ({len(others)} cell(s)): {why}")
    notes = [*swept.notes, *(f"{who}: not compared: {why}" for who, why in refused)]
    return SweepComparison(swept.title, metric, base, [CellComparison(others[c.a], c) for c in result.pairs], notes)


def format_sweep_table(sc: SweepComparison) -> str:
    """One row per (cell, subset): both means, the difference cell - baseline with its CI, p, and p
    Holm-adjusted over the cells."""
    head = ["cell", "subset", "n", "mean cell", "mean baseline", "diff cell-baseline [95% CI]", "p", holm_header(sc.m)]
    body = [[c.run.name, r.subset, *_row_cells(r), tabular.format_p(c.p_holm[r.subset])] for c in sc.cells for r in c.comparison.rows]
    title = (
        f"metric: {sc.metric} (percent); baseline = {sc.baseline.name} (run {sc.baseline.run_id}); diff = cell - baseline; "
        f"paired bootstrap CI, sign-flip permutation p, Holm over the {sc.m} cell(s)"
    )
    return title + "\n" + tabular.aligned(head, body, left=2)


def compare(
    a: str,
    b: str | None = None,
    metric: str = "auto",
    *,
    baseline: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
    tracking_uri: str | None = None,
    subsets: Sequence[str] = (),
) -> Comparison | SweepComparison:
    """``t2exp compare A B``: two runs (MLflow run ids or ``predictions.jsonl`` paths) ->
    :class:`~t2exp.evaluation.paired.Comparison`; ``t2exp compare SWEEP --baseline SPEC``: a
    sweep's parent run id (or an experiment name) and the baseline cell (a run id or ``key=value``
    overrides) -> :class:`SweepComparison`; either on the questions of ``subsets`` (all when none
    is named). Raises :class:`CompareError` (one line) otherwise."""
    if b is not None and baseline is None:
        return compare_runs(a, b, metric, n_boot=n_boot, seed=seed, tracking_uri=tracking_uri, subsets=subsets)
    if b is None and baseline:
        return compare_sweep(a, baseline, metric, n_boot=n_boot, seed=seed, tracking_uri=tracking_uri, subsets=subsets)
    if b is None:
        raise CompareError(
            f"one run given ({a}): give a second run (a run id or a predictions.jsonl path), or give a "
            "sweep's parent run id with --baseline RUN_ID|KEY=VALUE to compare every cell with that one"
        )
    raise CompareError("--baseline goes with one sweep (a parent run id), not with two runs: drop it, or the second run")
