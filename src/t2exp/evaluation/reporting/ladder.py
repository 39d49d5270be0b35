"""Report, the ablation ladder: runs that set ``rung`` (``+rung=<name>``, conf/rung/), one row per
rung in name order, each with its 95 % CIs and its paired difference to the rung before it (a
paired bootstrap CI and a sign-flip permutation p on the same questions). Rungs named ``l<i>_...``
form the ladder; rungs named ``alt_...`` (a baseline, a variant) are compared with the last ``l``
rung, the full method. When the runs hold both fold roles, only the held-out runs
(``dataset.fold_role=eval``) are rows: the tuned-on scores are in the tuning table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.paired import Delta, compare_pairs
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import AVG, CellSource, Entry
from t2exp.evaluation.reporting.tuning import ROLE, questions_of

KEY = "rung"


@dataclass
class Ladder:
    runs: list[RunInfo]
    columns: list[tuple[str, str]]
    cells: dict[tuple[str, str, str], Entry]
    primary: str
    against: dict[str, str] = field(default_factory=dict)  # run_id -> the run it is compared with
    deltas: dict[str, Delta] = field(default_factory=dict)


def ladder_runs(runs: Sequence[RunInfo]) -> list[RunInfo]:
    rungs = [r for r in runs if r.label(KEY) != "-"]
    if {r.params.get(ROLE) for r in rungs} >= {"eval", "tune"}:
        rungs = [r for r in rungs if r.params.get(ROLE) == "eval"]
    chain = sorted((r for r in rungs if not r.label(KEY).startswith("alt")), key=lambda r: r.label(KEY))
    alts = sorted((r for r in rungs if r.label(KEY).startswith("alt")), key=lambda r: r.label(KEY))
    return chain + alts


def build_ladder(runs: Sequence[RunInfo], subsets: Sequence[str], k: int, source: CellSource, n_boot: int, seed: int) -> Ladder | None:
    rows = ladder_runs(runs)
    if len(rows) < 2:
        return None
    primary = f"mrr_at_{k}"
    columns = [(s, primary) for s in [*subsets, AVG]] + [(AVG, "recall_at_3")]
    cells = {(r.run_id, s, m): source.cell(r, s, m) for r in rows for s, m in columns}
    lad = Ladder(rows, columns, cells, primary)
    chain = [r for r in rows if not r.label(KEY).startswith("alt")]
    for prev, r in zip(chain, chain[1:], strict=False):
        lad.against[r.run_id] = prev.run_id
    if chain:
        for r in rows:
            if r.label(KEY).startswith("alt"):
                lad.against[r.run_id] = chain[-1].run_id
    result = compare_pairs(source.predictions, lad.against.items(), primary, by_subset=False, same_questions=True, n_boot=n_boot, seed=seed)
    lad.deltas = {c.a: c.delta for c in result.pairs}  # other questions: no paired difference
    return lad


def render_ladder(lad: Ladder) -> str:
    label = {r.run_id: r.label(KEY) for r in lad.runs}
    heads = ["rung", "questions"] + [f"{'Avg' if s == AVG else s} {metric_label(m)}" for s, m in lad.columns]
    heads += [f"Δ Avg {metric_label(lad.primary)} [95 % CI] (p)", "vs"]
    rows = []
    for r in lad.runs:
        d = lad.deltas.get(r.run_id)
        delta = "–" if d is None else f"{tabular.value(d.diff, d.low, d.high, signed=True)} ({tabular.p_text(d.p)})"
        ref = label.get(lad.against.get(r.run_id, ""), "–")
        rows.append([label[r.run_id], questions_of(r)] + [lad.cells[(r.run_id, s, m)].text for s, m in lad.columns] + [delta, ref])
    lines = ["## Ablation ladder", "", tabular.markdown(heads, rows, left={0, 1, len(heads) - 1})]  # rung, questions, vs
    lines += [
        "",
        "Rows: the rungs in order (l0 → the full method), then the alternatives (alt_*), each against the full method. "
        "Δ: paired difference to the row named in 'vs' on the same questions (paired bootstrap 95 % CI, two-sided sign-flip "
        "permutation p). Values in %, 95 % bootstrap CIs.",
    ]
    return "\n".join(lines) + "\n"


def write_ladder_csv(lad: Ladder, path: Path) -> None:
    head = ["rung", "run_id", "questions", *(f"{s}/{m}" for s, m in lad.columns)]
    head += ["vs", "delta", "delta_ci_low", "delta_ci_high", "delta_p", "delta_n"]
    label = {r.run_id: r.label(KEY) for r in lad.runs}
    rows = []
    for r in lad.runs:
        d = lad.deltas.get(r.run_id)
        row = [label[r.run_id], r.run_id, questions_of(r)]
        row += ["" if (v := lad.cells[(r.run_id, s, m)].mean) is None else repr(v) for s, m in lad.columns]
        row += [label.get(lad.against.get(r.run_id, ""), "")]
        row += ["", "", "", "", ""] if d is None else [repr(d.diff), repr(d.low), repr(d.high), repr(d.p), str(d.n)]
        rows.append(row)
    tabular.write_csv(path, head, rows)
