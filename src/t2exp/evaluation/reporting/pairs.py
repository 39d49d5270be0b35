"""Report, all pairs (``t2exp report --pairs``): every two rows of the Table 3 layout compared
question by question on its primary metric (paired bootstrap CI, sign-flip permutation p), the
p-values Holm–Bonferroni-corrected over all the pairs: a view of
:func:`t2exp.evaluation.paired.compare_pairs`."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.paired import OTHER_QUESTIONS, Delta, compare_pairs
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import CellSource, Table
from t2exp.evaluation.stats import holm_header


@dataclass
class Pairs:
    keys: list[str]
    metric: str
    rows: list[tuple[RunInfo, RunInfo, Delta]] = field(default_factory=list)
    other_questions: int = 0

    @property
    def m(self) -> int:
        return len(self.rows)


def build_pairs(table: Table, source: CellSource, n_boot: int, seed: int) -> Pairs | None:
    """Row A minus row B for every two rows of ``table`` (in its order) on its primary metric;
    None without one (fewer than two rows, or no metric)."""
    if table.primary is None or len(table.runs) < 2:
        return None
    runs = {r.run_id: r for r in table.runs}
    every_two = [(a.run_id, b.run_id) for a, b in itertools.combinations(table.runs, 2)]
    result = compare_pairs(source.predictions, every_two, table.primary, by_subset=False, same_questions=True, n_boot=n_boot, seed=seed)
    rows = [(runs[c.a], runs[c.b], c.delta) for c in result.pairs]
    return Pairs(table.keys, table.primary, rows, result.count(OTHER_QUESTIONS))


def render_pairs(p: Pairs, headers: Mapping[str, str]) -> str:
    def label(r: RunInfo) -> str:
        return " · ".join(r.label(k) for k in p.keys)

    keys = " · ".join(headers.get(k, k) for k in p.keys)
    head = [f"A ({keys})", f"B ({keys})", "n", f"Δ A−B Avg {metric_label(p.metric)}", "p", holm_header(p.m)]
    rows = [
        [
            label(a),
            label(b),
            str(d.n),
            tabular.value(d.diff, d.low, d.high, signed=True),
            tabular.format_p(d.p),
            tabular.format_p(d.p_holm),
        ]
        for a, b, d in p.rows
    ]
    lines = [
        f"## All pairs: Avg {metric_label(p.metric)}",
        "",
        tabular.markdown(head, rows, left=2),
        "",
        "Δ in %, paired question by question, 95 % paired bootstrap CI in brackets; p: two-sided paired sign-flip "
        f"permutation; {holm_header(p.m)}: Holm–Bonferroni over all {p.m} pairs.",
    ]
    if p.other_questions:
        lines.append(f"Note: {p.other_questions} pair(s) asked other questions: not compared.")
    return "\n".join(lines) + "\n"


def write_pairs_csv(p: Pairs, path: Path) -> None:
    head = ["run_id_a", "run_id_b", "label_a", "label_b", "metric", "n", "delta", "delta_ci_low", "delta_ci_high", "p", "p_holm", "holm_m"]
    rows = [
        [a.run_id, b.run_id, a.name, b.name, p.metric, d.n, repr(d.diff), repr(d.low), repr(d.high), repr(d.p), repr(d.p_holm), p.m]
        for a, b, d in p.rows
    ]
    tabular.write_csv(path, head, rows)
