"""Report, tuned on vs reported on: every run on held-out questions (``dataset.fold_role=eval``)
next to the run with the same config on the questions it was tuned on (``dataset.fold_role=tune``),
e.g. the best trial of ``hydra/sweeper=held_out_optuna`` and its held-out run, or each rung of a ladder
run on both roles. Cells are the runs' logged metrics, as in every other table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from t2exp.data.folds import describe
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import AVG, CellSource, Entry, sort_runs, swept_keys

ROLE = "dataset.fold_role"
HEADERS = {"rag_method": "RAG method", "generator": "Generator"}


@dataclass
class Pair:
    tune: RunInfo
    eval: RunInfo


def _config(run: RunInfo) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in run.params.items() if k != ROLE))


def pairs(runs: Sequence[RunInfo]) -> list[Pair]:
    """Held-out runs with their tuning twin (same params but ``dataset.fold_role``); the newest
    twin when there are several."""
    tune: dict[tuple[tuple[str, str], ...], RunInfo] = {}
    for r in sorted(runs, key=lambda r: r.start_time):
        if r.params.get(ROLE) == "tune":
            tune[_config(r)] = r
    return [Pair(tune[_config(r)], r) for r in runs if r.params.get(ROLE) == "eval" and _config(r) in tune]


def questions_of(run: RunInfo) -> str:
    p = run.params
    folds = p.get("dataset.folds")
    if folds in (None, "None", "null"):
        return "all questions"
    fold = p.get("dataset.fold")
    return describe(int(folds), None if fold in (None, "None") else int(fold), p.get(ROLE, "eval"), int(p.get("dataset.fold_seed", "0")))


@dataclass
class TuningTable:
    keys: list[str]
    pairs: list[Pair]
    subsets: list[str]
    metric: str
    cells: dict[tuple[str, str], Entry]  # (run_id, subset)


def build_tuning(runs: Sequence[RunInfo], subsets: Sequence[str], metric: str, source: CellSource) -> TuningTable | None:
    found = pairs(runs)
    if not found:
        return None
    evals = [p.eval for p in found]
    keys = [k for k in swept_keys(runs) if k != ROLE] or ["rag_method"]  # the tuned keys vary over all runs
    order = {r.run_id: i for i, r in enumerate(sort_runs(evals, keys))}
    found.sort(key=lambda p: order[p.eval.run_id])
    cells = {(r.run_id, s): source.cell(r, s, metric) for p in found for r in (p.tune, p.eval) for s in [*subsets, AVG]}
    return TuningTable(keys, found, list(subsets), metric, cells)


def render_tuning(t: TuningTable) -> str:
    label = metric_label(t.metric)
    scopes = [*t.subsets, AVG]
    heads = [HEADERS.get(k, k) for k in t.keys] + ["tuned on"]
    heads += [f"{'Avg' if s == AVG else s} {label} (tuned on)" for s in scopes] + ["reported on"]
    heads += [f"{'Avg' if s == AVG else s} {label} (reported on)" for s in scopes] + ["Avg reported − tuned"]
    rows = []
    for p in t.pairs:
        tune_avg, eval_avg = t.cells[(p.tune.run_id, AVG)].mean, t.cells[(p.eval.run_id, AVG)].mean
        gap = tabular.value(None if tune_avg is None or eval_avg is None else eval_avg - tune_avg, signed=True)
        row = [p.eval.label(k) for k in t.keys] + [questions_of(p.tune)]
        row += [t.cells[(p.tune.run_id, s)].text for s in scopes] + [questions_of(p.eval)]
        row += [t.cells[(p.eval.run_id, s)].text for s in scopes] + [gap]
        rows.append(row)
    keys = len(t.keys)  # labels: the keys, "tuned on" and "reported on" (the questions of each run)
    lines = ["## Tuned on vs reported on", "", tabular.markdown(heads, rows, left={*range(keys + 1), keys + 1 + len(scopes)})]
    lines += [
        "",
        "Each row: one config run on the questions its values were chosen on (tuned on) and on held-out questions of "
        "the same subsets (reported on; the corpus is the same). Quote the reported-on columns. 95 % bootstrap CIs.",
    ]
    return "\n".join(lines) + "\n"


def write_tuning_csv(t: TuningTable, path: Path) -> None:
    scopes = [*t.subsets, AVG]
    head = [*t.keys, "tune_run_id", "tuned_on"] + [f"tune:{s}/{t.metric}" for s in scopes]
    head += ["eval_run_id", "reported_on"] + [f"eval:{s}/{t.metric}" for s in scopes]
    rows = []
    for p in t.pairs:
        row = [p.eval.label(k) for k in t.keys] + [p.tune.run_id, questions_of(p.tune)]
        row += ["" if (v := t.cells[(p.tune.run_id, s)].mean) is None else repr(v) for s in scopes]
        row += [p.eval.run_id, questions_of(p.eval)]
        row += ["" if (v := t.cells[(p.eval.run_id, s)].mean) is None else repr(v) for s in scopes]
        rows.append(row)
    tabular.write_csv(path, head, rows)
