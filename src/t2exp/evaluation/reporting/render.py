"""Report, render: Markdown and CSV of a table and of the corpus-size curve."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.paired import p_text
from t2exp.evaluation.reporting.tables import AVG, Cell, CurvePoint, Table
from t2exp.evaluation.stats import N_BOOT

HEADERS = {"generator": "Generator", "rag_method": "RAG method", "protocol": "Protocol", "embedder": "Embedder", "k": "k", "run": "Run"}


def _fmt_cell(c: Cell) -> str:
    return c.text + ("†" if c.derived and c.mean is not None else "")



def _col_header(subset: str, metric: str) -> str:
    return f"{'Avg' if subset == AVG else subset} {metric_label(metric)}"


def render_markdown(t: Table) -> str:
    heads = [HEADERS.get(k, k) for k in t.keys] + [_col_header(s, m) for s, m in t.columns]
    with_delta = t.best is not None
    if with_delta:
        heads.append("Δ vs best (p)")
    rows = []
    for r in t.runs:
        cells = [r.label(k) for k in t.keys] + [_fmt_cell(t.cells[(r.run_id, s, m)]) for s, m in t.columns]
        if with_delta:
            d = t.deltas.get(r.run_id)
            cells.append("best" if r.run_id == t.best else ("–" if d is None else f"{tabular.value(d.diff, signed=True)} ({p_text(d.p)})"))
        rows.append(cells)
    lines = [f"## {t.title}", "", tabular.markdown(heads, rows, left=len(t.keys)), ""]
    lines.append(f"Values in %, 95 % bootstrap CI in brackets ({N_BOOT:,} resamples of questions, as logged by each run); "
                 "Avg = question-weighted over subsets.")
    if any(c.derived for c in t.cells.values()):
        lines.append("† not logged by the run (its k differs): recomputed from its predictions.jsonl as the app computes it.")
    if with_delta:
        lines.append(f"Δ vs best: difference in Avg {metric_label(t.primary or '')} to the best row, paired question by question, "
                     "with a two-sided paired sign-flip permutation p-value (only for rows asked the same questions as the best row).")
    lines += [f"Note: {n}" for n in t.notes]
    return "\n".join(lines) + "\n"


def write_csv(t: Table, path: Path) -> None:
    head = list(t.keys) + ["run_id"]
    for s, m in t.columns:
        head += [f"{s}/{m}", f"{s}/{m}_ci_low", f"{s}/{m}_ci_high"]
    if t.best is not None:
        head += ["delta_metric", "delta_vs_best", "delta_ci_low", "delta_ci_high", "delta_p", "delta_n"]

    def num(v: float | None) -> str:
        return "" if v is None else repr(float(v))

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for r in t.runs:
            row: list[str | None] = [*(r.label(k) for k in t.keys), r.run_id]  # csv writes None as an empty field
            for s, m in t.columns:
                c = t.cells[(r.run_id, s, m)]
                row += [num(c.mean), num(c.low), num(c.high)]
            if t.best is not None:
                d = t.deltas.get(r.run_id)
                if r.run_id == t.best:
                    row += [t.primary, "0.0", "", "", "", ""]
                elif d is None:
                    row += [t.primary, "", "", "", "", ""]
                else:
                    row += [t.primary, num(d.diff), num(d.low), num(d.high), num(d.p), str(d.n)]
            w.writerow(row)


def render_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str) -> str:
    gh = [HEADERS.get(k, k) for k in group_keys]
    head = gh + ["Subset", "corpus_size", "Documents", "Questions (mean)", "Seeds", f"{metric_label(metric)} mean", "std"]
    rows = [[*p.group, p.subset, p.size, f"{p.docs:.0f}", f"{p.questions:.1f}", str(p.n), tabular.value(p.mean), tabular.value(p.std)]
            for p in points]
    lines = [f"## {metric_label(metric)} vs corpus size", "", tabular.markdown(head, rows, left=len(gh) + 2)]
    lines += ["", "Mean ± sample std over the runs of a cell (the corpus seeds); corpus_size=null is the full corpus."]
    return "\n".join(lines) + "\n"


def write_curve_csv(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(
            [*group_keys, "subset", "corpus_size", "documents", "questions_mean", "n_runs", f"{metric}_mean", f"{metric}_std", "values"]
        )
        for p in points:
            w.writerow([*p.group, p.subset, p.size, repr(p.docs), repr(p.questions), p.n, repr(p.mean), repr(p.std),
                        ";".join(repr(v) for v in p.values)])
