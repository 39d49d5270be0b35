"""Report, render: Markdown and CSV of a table and of the corpus-size curve."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.reporting.tables import AVG, CurvePoint, Entry, Table
from t2exp.evaluation.stats import N_BOOT, holm_header
from t2exp.evaluation.tabular import format_p, p_text

HEADERS = {"generator": "Generator", "rag_method": "RAG method", "protocol": "Protocol", "embedder": "Embedder", "k": "k", "run": "Run"}


def _fmt_cell(c: Entry) -> str:
    return c.text + ("†" if c.derived and c.mean is not None else "")


def _col_header(subset: str, metric: str) -> str:
    return f"{'Avg' if subset == AVG else subset} {metric_label(metric)}"


def baseline_word(t: Table) -> str:
    """``best`` (the row with the best average) or ``baseline`` (the row --baseline named)."""
    return "baseline" if t.named_baseline else "best"


def _delta_cells(t: Table, run_id: str) -> list[str]:
    """Δ vs the baseline with its CI, its raw p and its Holm-adjusted p."""
    if run_id == t.best:
        return [baseline_word(t), "", ""]
    d = t.deltas.get(run_id)
    if d is None:
        return [tabular.MISSING, "", ""]
    return [tabular.value(d.diff, d.low, d.high, signed=True), format_p(d.p), format_p(d.p_holm)]


def render_markdown(t: Table) -> str:
    heads = [HEADERS.get(k, k) for k in t.keys] + [_col_header(s, m) for s, m in t.columns] + [c[1] for c in t.costs]
    with_delta = t.best is not None
    if with_delta:
        heads += [f"Δ vs {baseline_word(t)}", "p", holm_header(t.m)]
    rows = []
    for r in t.runs:
        cells = [r.label(k) for k in t.keys] + [_fmt_cell(t.cells[(r.run_id, s, m)]) for s, m in t.columns]
        cells += [tabular.cost_text(r.metrics, c) for c in t.costs]
        if with_delta:
            cells += _delta_cells(t, r.run_id)
        rows.append(cells)
    lines = [f"## {t.title}", "", tabular.markdown(heads, rows, left=len(t.keys)), ""]
    lines.append(
        f"Values in %, 95 % bootstrap CI in brackets ({N_BOOT:,} resamples of questions, as logged by each run); "
        "Avg = question-weighted over subsets."
    )
    if t.costs:
        lines.append(
            f"{', '.join(c[1] for c in t.costs)}: what each cell cost, as its run logged it (tokens the generator counted, "
            "answers from the LLM cache included; the seconds spent generating; USD at generator.price)."
        )
    if any(c.derived for c in t.cells.values()):
        lines.append("† not logged by the run (its k differs): recomputed from its predictions.jsonl as the app computes it.")
    if with_delta:
        lines.append(delta_note(t))
    lines += [f"Note: {n}" for n in t.notes]
    return "\n".join(lines) + "\n"


def delta_note(t: Table) -> str:
    """What the Δ columns mean, naming the baseline and the correction."""
    base = next(r for r in t.runs if r.run_id == t.best)
    which = (
        f"the row --baseline named ({tabular.md_escape(base.name)}, run {base.run_id[:8]})"
        if t.named_baseline
        else "the row with the best Avg (--baseline picks another)"
    )
    return (
        f"Δ vs {baseline_word(t)}: difference in Avg {metric_label(t.primary or '')} to {which}, paired question by "
        "question, with its 95 % paired bootstrap CI and a two-sided paired sign-flip permutation p (only for rows asked "
        f"the same questions); {holm_header(t.m)}: that p Holm–Bonferroni-corrected over the {t.m} comparison(s) with the "
        f"{baseline_word(t)} row."
    )


def write_csv(t: Table, path: Path) -> None:
    head = list(t.keys) + ["run_id"]
    for s, m in t.columns:
        head += [f"{s}/{m}", f"{s}/{m}_ci_low", f"{s}/{m}_ci_high"]
    head += [c[0] for c in t.costs]
    if t.best is not None:
        head += [
            "delta_metric",
            "baseline_run_id",
            "delta_vs_baseline",
            "delta_ci_low",
            "delta_ci_high",
            "delta_p",
            "delta_p_holm",
            "holm_m",
            "delta_n",
        ]

    rows = []
    for r in t.runs:
        row: list[str | None] = [*(r.label(k) for k in t.keys), r.run_id]  # csv writes None as an empty field
        for s, m in t.columns:
            c = t.cells[(r.run_id, s, m)]
            row += [_num(c.mean), _num(c.low), _num(c.high)]
        row += [_num(r.metrics.get(c[0])) for c in t.costs]
        if t.best is not None:
            d = t.deltas.get(r.run_id)
            row += [t.primary, t.best]
            if r.run_id == t.best:
                row += ["0.0", "", "", "", "", "", ""]
            elif d is None:
                row += ["", "", "", "", "", "", ""]
            else:
                row += [_num(d.diff), _num(d.low), _num(d.high), _num(d.p), _num(d.p_holm), str(t.m), str(d.n)]
        rows.append(row)
    tabular.write_csv(path, head, rows)


def _num(v: float | None) -> str:
    return "" if v is None else repr(float(v))


def render_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str) -> str:
    gh = [HEADERS.get(k, k) for k in group_keys]
    head = gh + ["Subset", "corpus_size", "Documents", "Questions (mean)", "Seeds", f"{metric_label(metric)} mean", "std"]
    rows = [
        [*p.group, p.subset, p.size, f"{p.docs:.0f}", f"{p.questions:.1f}", str(p.n), tabular.value(p.mean), tabular.value(p.std)]
        for p in points
    ]
    lines = [f"## {metric_label(metric)} vs corpus size", "", tabular.markdown(head, rows, left=len(gh) + 2)]
    lines += ["", "Mean ± sample std over the runs of a cell (the corpus seeds); corpus_size=null is the full corpus."]
    return "\n".join(lines) + "\n"


def write_curve_csv(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, path: Path) -> None:
    head = [*group_keys, "subset", "corpus_size", "documents", "questions_mean", "n_runs", f"{metric}_mean", f"{metric}_std", "values"]
    rows = [
        [*p.group, p.subset, p.size, repr(p.docs), repr(p.questions), p.n, repr(p.mean), repr(p.std), ";".join(repr(v) for v in p.values)]
        for p in points
    ]
    tabular.write_csv(path, head, rows)


def experiment_link(experiment_id: str) -> str:
    """The MLflow UI's address of an experiment's page in its runs view ("Model training"), relative
    to the UI's page. MLflow 3.17 opens ``#/experiments/<id>`` in the view the browser last chose,
    the GenAI overview in a new browser (held behind a one-time "Detect Issues" notice), whatever
    the experiment's ``mlflow.experimentKind`` tag says; ``workflowType`` in the address picks the view."""
    return f"#/experiments/{experiment_id}?workflowType=machine_learning"


def run_link(experiment_id: str, run_id: str) -> str:
    """The MLflow UI's address of a run, relative to the UI's page (what a run's description links)."""
    return f"#/experiments/{experiment_id}/runs/{run_id}"


def questions_link(experiment_id: str, run_id: str, other_id: str) -> str:
    """The MLflow UI's trace comparison of two runs, question by question (each of ``run_id``'s
    traces next to ``other_id``'s trace of the same question, their assessments side by side)."""
    return f"#/experiments/{experiment_id}/evaluation-runs/{run_id}/traces?compareToRunUuid={other_id}"


QUESTIONS_NOTE = (
    "Questions: the cell's traces next to the baseline's, question by question (MLflow's trace comparison); "
    "`t2exp compare CELL_RUN BASELINE_RUN` lists the questions that differ, largest effect first."
)


def _questions_cell(t: Table, experiment_id: str, run_id: str) -> str:
    """A row's link to its questions next to the baseline's (none for the baseline itself)."""
    if t.best is None or run_id == t.best:
        return ""
    return tabular.Markdown(f"[vs {baseline_word(t)}]({questions_link(experiment_id, run_id, t.best)})")


SUMMARY_ROWS = 5  # rows the description's first lines sum up (a collapsed description shows about that much)


def _subset_pairs(t: Table, run_id: str) -> str:
    """``FinQA 46.7 vs 100.0, TAT-DQA 51.7 vs 97.5``: per subset, the row's primary metric next to
    the baseline's (the values of the table's cells)."""

    def mean(rid: str, subset: str) -> str:
        c = t.cells.get((rid, subset, str(t.primary)))
        return tabular.value(None if c is None else c.mean)

    subsets = [s for s, m in t.columns if m == t.primary and s != AVG]
    return ", ".join(f"{tabular.md_escape(s)} {mean(run_id, s)} vs {mean(str(t.best), s)}" for s in subsets)


def _subset_deltas(t: Table, run_id: str) -> str:
    """``; Δ FinQA -5.0 [-9.2, -0.8], Δ TAT-DQA +1.7 [...]``: each subset's difference with the
    baseline and its CI (nothing for one subset: the average's is its own)."""
    per = t.subset_deltas.get(run_id, {})
    shown = [f"Δ {tabular.md_escape(s)} {tabular.value(d.diff, d.low, d.high, signed=True)}" for s, d in per.items()]
    return "; " + ", ".join(shown) if len(shown) > 1 else ""


def _summary(t: Table, experiment_id: str) -> list[str]:
    """The description's first lines, which MLflow shows before its "Show more": each row compared
    with the baseline (the first :data:`SUMMARY_ROWS`): the primary metric per subset of both, the
    Δ of the average with CI, p and Holm's p, each subset's Δ with CI, and the link to its questions next to the baseline's."""
    base = next((r for r in t.runs if r.run_id == t.best), None)
    if base is None or not t.deltas:
        return []
    lines = []
    for r in [r for r in t.runs if r.run_id in t.deltas][:SUMMARY_ROWS]:
        d = t.deltas[r.run_id]
        per_subset = _subset_pairs(t, r.run_id)
        lines.append(
            f"**{tabular.md_escape(r.name)}** vs {baseline_word(t)} **{tabular.md_escape(base.name)}**: {metric_label(t.primary or '')} "
            f"{per_subset + '; ' if per_subset else ''}Δ Avg {tabular.value(d.diff, d.low, d.high, signed=True)}, "
            f"{p_text(d.p)}, Holm {p_text(d.p_holm)}{_subset_deltas(t, r.run_id)} · "
            f"[its questions next to the {baseline_word(t)}'s]({questions_link(experiment_id, r.run_id, base.run_id)})"
        )
    more = len(t.deltas) - len(lines)
    return ["  \n".join(lines) + (f"  \n… {more} more in the table" if more > 0 else "")]


DESCRIPTION_LIMIT = 7500  # MLflow keeps a tag value of at most 8,000 characters


def render_headline(t: Table, experiment_id: str, intro: str, outro: str) -> str:
    """The report's headline as a run description (Markdown the MLflow UI renders): ``t``'s table
    with one linked cell name per row instead of the label columns; rows past what a tag holds
    are left to the report's files."""
    heads = ["Cell"] + [_col_header(s, m) for s, m in t.columns]
    if t.best is not None:
        heads += [f"Δ vs {baseline_word(t)}", "p", holm_header(t.m), "Questions"]
    rows = []
    for r in t.runs:
        cells: list[str] = [tabular.Markdown(f"[{tabular.md_escape(r.name)}]({run_link(experiment_id, r.run_id)})")]
        cells += [_fmt_cell(t.cells[(r.run_id, s, m)]) for s, m in t.columns]
        rows.append(cells + ([*_delta_cells(t, r.run_id), _questions_cell(t, experiment_id, r.run_id)] if t.best is not None else []))
    notes = [delta_note(t), QUESTIONS_NOTE] if t.best is not None else []
    summary = _summary(t, experiment_id)
    for shown in range(len(rows), 0, -1):
        left = len(rows) - shown
        more = [f"{left} more row(s) in report/{t.name}.md."] if left else []
        text = "\n\n".join([*summary, intro, tabular.markdown(heads, rows[:shown]), *notes, *more, outro]) + "\n"
        if len(text) <= DESCRIPTION_LIMIT:
            return text
    return "\n\n".join([*summary, intro, outro]) + "\n"
