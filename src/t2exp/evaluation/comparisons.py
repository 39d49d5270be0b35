"""``t2exp compare``'s Python API (:func:`compare`, exported as ``t2exp.evaluation.compare``): two
runs (:func:`t2exp.evaluation.paired.compare_runs`), or every cell of a sweep against a baseline
cell (:func:`compare_sweep`).

A sweep: its parent run id (or an experiment name) is read as ``t2exp report`` reads it
(:func:`t2exp.evaluation.reporting.runs.resolve_target`: the FINISHED cells, the newest run of
each), the baseline is the cell ``--baseline`` names
(:func:`t2exp.evaluation.reporting.tables.select_baseline`: a run id or ``key=value`` overrides),
and each other cell is compared with it as two runs are (:func:`~t2exp.evaluation.paired.compare_rows`:
A = the cell, B = the baseline), its p-values Holm-corrected over the cells compared
(:func:`t2exp.evaluation.stats.holm`, per subset row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from t2exp.evaluation import tabular
from t2exp.evaluation.paired import (
    CompareError,
    Comparison,
    check_metric,
    compare_rows,
    compare_runs,
    default_metric,
    format_p,
    lazy_client,
    load_run_predictions,
)
from t2exp.evaluation.reporting.runs import RunInfo, resolve_target
from t2exp.evaluation.reporting.tables import select_baseline
from t2exp.evaluation.stats import CI_SEED, N_BOOT, holm, holm_header


@dataclass
class CellComparison:
    """One cell against the baseline, and its p-values Holm-adjusted over the sweep's cells."""

    run: RunInfo
    comparison: Comparison
    p_holm: dict[str, float] = field(default_factory=dict)  # subset row -> adjusted p


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


def _apply_holm(cells: list[CellComparison]) -> None:
    """Each cell's ``p_holm``: per subset row, Holm over the cells that have that row."""
    subsets = dict.fromkeys(r.subset for c in cells for r in c.comparison.rows)
    for subset in subsets:
        having = [(c, r.p_value) for c in cells for r in c.comparison.rows if r.subset == subset]
        for (c, _), adjusted in zip(having, holm([p for _, p in having]), strict=True):
            c.p_holm[subset] = adjusted


def compare_sweep(
    target: str, baseline: str, metric: str = "auto", *, n_boot: int = N_BOOT, seed: int = CI_SEED, tracking_uri: str | None = None
) -> SweepComparison:
    """Every FINISHED cell of the sweep ``target`` (a parent run id, or an experiment name) against
    the cell ``baseline`` names, question by question on ``metric`` (``auto``: nm when every cell
    has it, else the baseline's MRR@k); Holm-corrected over the cells."""
    check_metric(metric, n_boot)
    client = lazy_client(tracking_uri)()
    swept = resolve_target(client, target)
    base = select_baseline(swept.runs, baseline)
    others = [r for r in swept.runs if r.run_id != base.run_id]
    if not others:
        raise CompareError(f"{swept.title}: only the baseline {base.name!r} finished; no other cell to compare with it")
    rows = {r.run_id: load_run_predictions(client, r.run_id) for r in swept.runs}
    if metric == "auto":
        metric = default_metric(rows[base.run_id], *(rows[r.run_id] for r in others))
    cells: list[CellComparison] = []
    refused: list[tuple[str, str]] = []
    for r in others:
        try:
            cells.append(CellComparison(r, compare_rows(rows[r.run_id], rows[base.run_id], metric, n_boot=n_boot, seed=seed)))
        except CompareError as exc:
            refused.append((f"{r.name} ({r.run_id[:8]})", str(exc)))
    if not cells:
        why = "; ".join(f"{who}: {why}" for who, why in refused)
        raise CompareError(f"{swept.title}: no cell could be compared with the baseline {base.name!r} ({len(others)} cell(s)): {why}")
    notes = [*swept.notes, *(f"{who}: not compared: {why}" for who, why in refused)]
    _apply_holm(cells)
    return SweepComparison(swept.title, metric, base, cells, notes)


def format_sweep_table(sc: SweepComparison) -> str:
    """One row per (cell, subset): both means, the difference cell - baseline with its CI, p, and p
    Holm-adjusted over the cells."""
    head = ["cell", "subset", "n", "mean cell", "mean baseline", "diff cell-baseline [95% CI]", "p", holm_header(sc.m)]
    body = [
        [
            c.run.name,
            r.subset,
            str(r.n),
            tabular.value(r.mean_a),
            tabular.value(r.mean_b),
            tabular.value(r.diff, r.ci_low, r.ci_high, signed=True),
            format_p(r.p_value),
            format_p(c.p_holm[r.subset]),
        ]
        for c in sc.cells
        for r in c.comparison.rows
    ]
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
) -> Comparison | SweepComparison:
    """``t2exp compare A B``: two runs (MLflow run ids or ``predictions.jsonl`` paths) ->
    :class:`~t2exp.evaluation.paired.Comparison`; ``t2exp compare SWEEP --baseline SPEC``: a
    sweep's parent run id (or an experiment name) and the baseline cell (a run id or ``key=value``
    overrides) -> :class:`SweepComparison`. Raises :class:`CompareError` (one line) otherwise."""
    if b is not None and baseline is None:
        return compare_runs(a, b, metric, n_boot=n_boot, seed=seed, tracking_uri=tracking_uri)
    if b is None and baseline:
        return compare_sweep(a, baseline, metric, n_boot=n_boot, seed=seed, tracking_uri=tracking_uri)
    if b is None:
        raise CompareError(
            f"one run given ({a}): give a second run (a run id or a predictions.jsonl path), or give a "
            "sweep's parent run id with --baseline RUN_ID|KEY=VALUE to compare every cell with that one"
        )
    raise CompareError("--baseline goes with one sweep (a parent run id), not with two runs: drop it, or the second run")
