"""``python -m t2exp.report TARGET``: paper-style tables and plots from MLflow runs.

TARGET is a sweep's parent run id (its FINISHED child runs) or an experiment name (every FINISHED
run of the experiment that is neither a sweep parent nor a report; one run per config cell, the
newest). Written to ``--out`` (default ``outputs/reports/<target>``) and logged as artifacts under
``report/`` of the parent run, or of a new run named ``report`` for an experiment:

- ``table3.md|csv``: rows generator x rag_method (+ every other key that differs between the
  runs, e.g. embedder, k, dataset.corpus_size); columns NM and MRR@k per subset and the
  question-weighted average, each with its 95 % bootstrap CI, and "Δ vs best (p)": the paired
  difference to the best row on the questions both answered (paired bootstrap CI, sign-flip
  permutation p; :mod:`t2exp.compare`).
- ``table4.md|csv`` when the runs set the embedder (an embedder sweep): rows embedder; columns
  R@1, R@5, MRR@5 per subset.
- ``corpus_size.md|csv`` and ``corpus_size_mrr_at_<k>.png`` when the runs differ in
  ``dataset.corpus_size``: MRR@k against the number of indexed documents, mean ± std over the
  other varying keys (the seeds).
- ``table3_bars.png``, ``table4_bars.png``: grouped bars per subset with the CIs.

Every number is a child's logged metric (``<subset>/<metric>`` and its ``_ci_low/_ci_high``),
copied exactly into the CSV. Only a retrieval metric a run did not log (MRR@5 of a k=3 run) is
recomputed from its ``predictions.jsonl`` exactly as the app computes it, and marked with †.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from t2exp.compare import DEFAULT_TRACKING_URI, compare_values, format_p, load_run_predictions, pair_predictions, question_value
from t2exp.data import SUBSETS
from t2exp.errors import T2ExpError
from t2exp.metrics import bootstrap_ci
from t2exp.paths import PROJECT_ROOT

AVG = "avg"
METHOD_ORDER = ("pretrained_only", "oracle", "base", "hybrid", "reranker", "hyde", "summarization", "sumcontext", "metadata_hybrid")
GROUPS = ("dataset", "embedder", "store", "rag_method", "generator", "reranker")
HEADERS = {"generator": "Generator", "rag_method": "RAG method", "embedder": "Embedder", "k": "k", "run": "Run"}
METRIC_LABELS = {"nm": "NM"}
SEED_KEYS = ("dataset.corpus_seed", "seed")
MAX_BAR_ROWS = 16
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_SKIP_OVERRIDE = re.compile(r"^(hydra|paths|tracking)\.|^(experiment|resume|experiment_name)$")


class ReportError(T2ExpError):
    pass


def metric_label(metric: str) -> str:
    m = re.match(r"^(mrr|recall)_at_(\d+)$", metric)
    if m:
        return f"{'MRR' if m.group(1) == 'mrr' else 'R'}@{m.group(2)}"
    return METRIC_LABELS.get(metric, metric)


# --- runs -------------------------------------------------------------------------------------


@dataclass
class RunInfo:
    run_id: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    overrides: dict[str, str]
    start_time: int = 0

    @classmethod
    def from_mlflow(cls, run: Any) -> RunInfo:
        tags = run.data.tags
        return cls(
            run_id=run.info.run_id,
            name=tags.get("mlflow.runName", run.info.run_id[:8]),
            params=dict(run.data.params),
            metrics=dict(run.data.metrics),
            overrides=parse_overrides(tags.get("t2exp.overrides", "")),
            start_time=int(run.info.start_time or 0),
        )

    def label(self, key: str) -> str:
        if key == "run":
            return self.run_id[:8]
        if key in self.params:
            return "null" if self.params[key] == "None" else self.params[key]
        if key in GROUPS and f"{key}.name" in self.params:
            return self.params[f"{key}.name"]
        if key in self.overrides:
            return self.overrides[key]
        return "-"


def parse_overrides(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.split():
        if "=" not in token:
            continue
        key, value = token.split("=", 1)
        key = key.lstrip("+~")
        if "@" in key:  # group@package=option
            key = key.split("@", 1)[0]
        if not _SKIP_OVERRIDE.search(key):
            out[key] = value
    return out


@dataclass
class Target:
    title: str
    experiment_id: str
    parent_id: str | None
    runs: list[RunInfo]
    notes: list[str] = field(default_factory=list)


def _search_all(client: Any, experiment_id: str, filter_string: str = "") -> list[Any]:
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string, max_results=1000, page_token=token,
                                  order_by=["attributes.start_time ASC"])
        out.extend(page)
        token = page.token
        if not token:
            return out


def _newest_per_cell(runs: list[Any]) -> list[Any]:
    keep: dict[str, Any] = {}
    for r in runs:
        key = r.data.tags.get("t2exp.cell_key") or r.info.run_id
        if key not in keep or (r.info.start_time or 0) >= (keep[key].info.start_time or 0):
            keep[key] = r
    return sorted(keep.values(), key=lambda r: r.info.start_time or 0)


def resolve_target(client: Any, target: str) -> Target:
    """A parent run id (its children) or an experiment name (its finished result runs)."""
    notes: list[str] = []
    if _RUN_ID.match(target):
        try:
            parent = client.get_run(target)
        except Exception:  # noqa: BLE001 - not a run id after all: try it as an experiment name
            parent = None
        if parent is not None:
            exp_id = parent.info.experiment_id
            children = _search_all(client, exp_id, f"tags.mlflow.parentRunId = '{target}'")
            if not children:
                raise ReportError(f"run {target} has no child runs; pass a sweep's parent run id or an experiment name")
            bad = [c for c in children if c.info.status != "FINISHED"]
            if bad:
                notes.append(f"{len(bad)} child run(s) not FINISHED and left out: "
                             + ", ".join(f"{c.info.run_id[:8]} ({c.info.status})" for c in bad))
            done = _newest_per_cell([c for c in children if c.info.status == "FINISHED"])
            title = parent.data.tags.get("mlflow.runName", target)
            return Target(f"{title} (parent run {target})", exp_id, target, [RunInfo.from_mlflow(r) for r in done], notes)
    exp = client.get_experiment_by_name(target)
    if exp is None:
        raise ReportError(f"{target!r} is neither a run id nor an MLflow experiment name at this tracking URI")
    runs = [r for r in _search_all(client, exp.experiment_id)
            if r.info.status == "FINISHED" and r.data.tags.get("t2exp.sweep") != "parent" and "t2exp.report" not in r.data.tags]
    if not runs:
        raise ReportError(f"experiment {target!r} has no FINISHED runs")
    done = _newest_per_cell(runs)
    if len(done) < len(runs):
        notes.append(f"{len(runs) - len(done)} older run(s) of an already reported config cell left out (newest kept)")
    return Target(f"experiment {target}", exp.experiment_id, None, [RunInfo.from_mlflow(r) for r in done], notes)


# --- layout -------------------------------------------------------------------------------------


def swept_keys(runs: Sequence[RunInfo]) -> list[str]:
    """Keys whose value differs between runs: override keys first, then the main groups and k."""
    candidates: list[str] = ["generator", "rag_method"]
    for r in runs:
        for key in r.overrides:
            if key not in candidates:
                candidates.append(key)
    for key in ("embedder", "k", "reranker", "store", "dataset"):
        if key not in candidates:
            candidates.append(key)
    return [k for k in candidates if len({r.label(k) for r in runs}) > 1]


def _sort_value(key: str, value: str) -> tuple[Any, ...]:
    if key == "rag_method" and value in METHOD_ORDER:
        return (0, METHOD_ORDER.index(value), "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1 if value in ("null", "-") else 0, math.inf, value)


def label_keys(runs: Sequence[RunInfo], first: Sequence[str]) -> list[str]:
    keys = list(first) + [k for k in swept_keys(runs) if k not in first]
    if len({tuple(r.label(k) for k in keys) for r in runs}) < len(runs):
        keys.append("run")  # identical labels (e.g. a config key set outside the overrides): tell them apart
    return keys


def sort_runs(runs: Sequence[RunInfo], keys: Sequence[str]) -> list[RunInfo]:
    return sorted(runs, key=lambda r: tuple(_sort_value(k, r.label(k)) for k in keys))


def find_subsets(runs: Sequence[RunInfo]) -> list[str]:
    found: set[str] = set()
    for r in runs:
        for name in r.metrics:
            subset, _, metric = name.partition("/")
            if subset != AVG and re.match(r"^(nm|mrr_at_\d+|recall_at_\d+)$", metric):
                found.add(subset)
    return sorted(found, key=lambda s: (SUBSETS.index(s) if s in SUBSETS else len(SUBSETS), s))


# --- cells ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    mean: float | None
    low: float | None = None
    high: float | None = None
    derived: bool = False


class CellSource:
    """Logged metrics first; a missing retrieval metric is recomputed from predictions.jsonl."""

    def __init__(self, loader: Callable[[str], list[dict[str, Any]] | None]) -> None:
        self._loader = loader
        self._preds: dict[str, list[dict[str, Any]] | None] = {}

    def predictions(self, run_id: str) -> list[dict[str, Any]] | None:
        if run_id not in self._preds:
            try:
                self._preds[run_id] = self._loader(run_id)
            except T2ExpError:
                self._preds[run_id] = None
        return self._preds[run_id]

    def cell(self, run: RunInfo, subset: str, metric: str) -> Cell:
        key = f"{subset}/{metric}"
        if key in run.metrics:
            return Cell(run.metrics[key], run.metrics.get(f"{key}_ci_low"), run.metrics.get(f"{key}_ci_high"))
        if metric == "nm":
            return Cell(None)
        rows = self.predictions(run.run_id) or []
        values = [question_value(r, metric) for r in rows if subset == AVG or r.get("subset") == subset]
        vals = [v for v in values if v is not None]
        if not vals:
            return Cell(None)
        lo, hi = bootstrap_ci(vals, 1000, 0)  # as the app: aggregate(..., ci=True, seed=0)
        return Cell(100.0 * sum(vals) / len(vals), lo, hi, derived=True)


@dataclass
class Delta:
    diff: float
    low: float
    high: float
    p: float
    n: int


@dataclass
class Table:
    name: str
    title: str
    keys: list[str]
    runs: list[RunInfo]
    columns: list[tuple[str, str]]  # (subset, metric)
    cells: dict[tuple[str, str, str], Cell]  # (run_id, subset, metric)
    primary: str | None = None
    best: str | None = None
    deltas: dict[str, Delta] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def build_table(name: str, title: str, runs: Sequence[RunInfo], keys: list[str], subsets: Sequence[str],
                metrics: Sequence[str], source: CellSource) -> Table:
    ordered = sort_runs(runs, keys)
    columns = [(s, m) for s in [*subsets, AVG] for m in metrics]
    cells = {(r.run_id, s, m): source.cell(r, s, m) for r in ordered for s, m in columns}
    used = [(s, m) for s, m in columns if any(cells[(r.run_id, s, m)].mean is not None for r in ordered)]
    t = Table(name, title, keys, ordered, used, cells)
    empty = [m for m in metrics if all((s, m) not in used for s in [*subsets, AVG])]
    if empty:
        t.notes.append(f"Not computed by any run (left out): {', '.join(metric_label(m) for m in empty)}"
                       + (" — retrieval-only runs (generator=none) have no NM" if "nm" in empty else ""))
    return t


def add_deltas(table: Table, metrics: Sequence[str], source: CellSource, n_boot: int, seed: int) -> None:
    """Δ vs best: each row against the row with the best question-weighted average."""
    primary = next((m for m in metrics if any(table.cells[(r.run_id, AVG, m)].mean is not None for r in table.runs)), None)
    if primary is None or len(table.runs) < 2:
        return
    scored = [(table.cells[(r.run_id, AVG, primary)].mean, r) for r in table.runs]
    scored = [(v, r) for v, r in scored if v is not None]

    def rank(item: tuple[float, RunInfo]) -> tuple[float, ...]:  # ties: the later metrics decide
        later = [table.cells[(item[1].run_id, AVG, m)].mean for m in metrics[metrics.index(primary) + 1 :]]
        return (item[0], *[-math.inf if v is None else v for v in later])

    best = max(scored, key=rank)[1]
    table.primary, table.best = primary, best.run_id
    best_rows = source.predictions(best.run_id)
    if best_rows is None:
        table.notes.append("Δ vs best: the best run has no predictions.jsonl artifact")
        return
    other_questions = 0
    for _, r in scored:
        if r.run_id == best.run_id:
            continue
        rows = source.predictions(r.run_id)
        if rows is None:
            continue
        paired = pair_predictions(rows, best_rows, primary)
        if paired.only_a or paired.only_b:
            # other questions (another corpus subsample or sample): the paired difference would not
            # be the difference of the table's averages, so none is shown
            other_questions += 1
            continue
        if paired.n == 0:
            continue
        a = [v for xs, _ in paired.values.values() for v in xs]
        b = [v for _, ys in paired.values.values() for v in ys]
        c = compare_values(AVG, a, b, n_boot, seed)
        table.deltas[r.run_id] = Delta(c.diff, c.ci_low, c.ci_high, c.p_value, c.n)
    if other_questions:
        table.notes.append(f"Δ vs best: not shown for {other_questions} row(s) asked other questions than the best row")


# --- rendering ------------------------------------------------------------------------------------


def _fmt_cell(c: Cell) -> str:
    if c.mean is None:
        return "–"
    text = f"{c.mean:.1f}"
    if c.low is not None and c.high is not None:
        text += f" [{c.low:.1f}, {c.high:.1f}]"
    return text + ("†" if c.derived else "")


def _p_text(p: float) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"={text}"


def _col_header(subset: str, metric: str) -> str:
    return f"{'Avg' if subset == AVG else subset} {metric_label(metric)}"


def render_markdown(t: Table) -> str:
    heads = [HEADERS.get(k, k) for k in t.keys] + [_col_header(s, m) for s, m in t.columns]
    with_delta = t.best is not None
    if with_delta:
        heads.append("Δ vs best (p)")
    lines = [f"## {t.title}", "", "| " + " | ".join(heads) + " |",
             "|" + "|".join(["---"] * len(t.keys) + ["---:"] * (len(heads) - len(t.keys))) + "|"]
    for r in t.runs:
        cells = [r.label(k) for k in t.keys] + [_fmt_cell(t.cells[(r.run_id, s, m)]) for s, m in t.columns]
        if with_delta:
            d = t.deltas.get(r.run_id)
            cells.append("best" if r.run_id == t.best else ("–" if d is None else f"{d.diff:+.1f} (p{_p_text(d.p)})"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Values in %, 95 % bootstrap CI in brackets (1,000 resamples of questions, as logged by each run); "
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
            row = [r.label(k) for k in t.keys] + [r.run_id]
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


def _pyplot():  # noqa: ANN202
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_bars(t: Table, path: Path) -> bool:
    """One panel per metric; groups = subsets + Avg; one bar (with its CI) per row."""
    if not t.runs or len(t.runs) > MAX_BAR_ROWS:
        return False
    plt = _pyplot()
    metrics = list(dict.fromkeys(m for _, m in t.columns))
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(6.0, 1.3 * len(t.runs) + 4.0) * len(metrics) / 1.6, 4.2), squeeze=False)
    width = 0.8 / len(t.runs)
    for ax, metric in zip(axes[0], metrics):
        subsets = [s for s, m in t.columns if m == metric]
        for i, r in enumerate(t.runs):
            xs, ys, err_lo, err_hi = [], [], [], []
            for j, s in enumerate(subsets):
                c = t.cells[(r.run_id, s, metric)]
                if c.mean is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(c.mean)
                err_lo.append(c.mean - c.low if c.low is not None else 0.0)
                err_hi.append(c.high - c.mean if c.high is not None else 0.0)
            label = " / ".join(r.label(k) for k in t.keys)
            ax.bar(xs, ys, width=width, yerr=[err_lo, err_hi], capsize=2, label=label)
        ax.set_xticks(range(len(subsets)))
        ax.set_xticklabels(["Avg" if s == AVG else s for s in subsets])
        ax.set_ylabel(f"{metric_label(metric)} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(metric_label(metric))
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8,
               title=" / ".join(HEADERS.get(k, k) for k in t.keys), title_fontsize=8)
    fig.tight_layout(rect=(0, 0.08 + 0.05 * math.ceil(len(labels) / 4), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# --- corpus size ----------------------------------------------------------------------------------


@dataclass
class CurvePoint:
    group: tuple[str, ...]
    subset: str
    size: str  # the dataset.corpus_size param ("null" = full corpus)
    docs: float  # indexed documents (the logged <subset>/corpus_size)
    mean: float
    std: float
    n: int
    questions: float
    values: list[float]


def corpus_curve(runs: Sequence[RunInfo], keys: Sequence[str], subsets: Sequence[str], metric: str,
                 source: CellSource) -> tuple[list[str], list[CurvePoint]]:
    group_keys = [k for k in keys if k not in ("dataset.corpus_size", "run", *SEED_KEYS)
                  and len({r.label(k) for r in runs}) > 1]
    buckets: dict[tuple[tuple[str, ...], str, str], list[RunInfo]] = {}
    for r in runs:
        g = tuple(r.label(k) for k in group_keys)
        for s in subsets:
            buckets.setdefault((g, s, r.label("dataset.corpus_size")), []).append(r)
    points: list[CurvePoint] = []
    for (g, s, size), rs in buckets.items():
        vals, docs, qs = [], [], []
        for r in rs:
            c = source.cell(r, s, metric)
            d = r.metrics.get(f"{s}/corpus_size")
            if c.mean is None or d is None:
                continue
            vals.append(c.mean)
            docs.append(d)
            qs.append(r.metrics.get(f"{s}/questions", float("nan")))
        if vals:
            std = statistics.stdev(vals) if len(vals) > 1 else 0.0
            points.append(CurvePoint(g, s, size, statistics.fmean(docs), statistics.fmean(vals), std, len(vals), statistics.fmean(qs), vals))
    points.sort(key=lambda p: (p.group, subsets.index(p.subset), p.docs))
    return group_keys, points


def render_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str) -> str:
    gh = [HEADERS.get(k, k) for k in group_keys]
    lines = [f"## {metric_label(metric)} vs corpus size", "",
             "| " + " | ".join(gh + ["Subset", "corpus_size", "Documents", "Questions (mean)", "Seeds",
                                      f"{metric_label(metric)} mean", "std"]) + " |",
             "|" + "|".join(["---"] * (len(gh) + 2) + ["---:"] * 5) + "|"]
    for p in points:
        lines.append("| " + " | ".join([*p.group, p.subset, p.size, f"{p.docs:.0f}", f"{p.questions:.1f}", str(p.n),
                                        f"{p.mean:.1f}", f"{p.std:.1f}"]) + " |")
    lines += ["", "Mean ± sample std over the runs of a cell (the corpus seeds); corpus_size=null is the full corpus."]
    return "\n".join(lines) + "\n"


def write_curve_csv(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([*group_keys, "subset", "corpus_size", "documents", "questions_mean", "n_runs", f"{metric}_mean", f"{metric}_std", "values"])
        for p in points:
            w.writerow([*p.group, p.subset, p.size, repr(p.docs), repr(p.questions), p.n, repr(p.mean), repr(p.std),
                        ";".join(repr(v) for v in p.values)])


def plot_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, subsets: Sequence[str], path: Path) -> None:
    plt = _pyplot()
    shown = [s for s in subsets if any(p.subset == s for p in points)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5.0 * len(shown), 4.0), squeeze=False)
    groups = list(dict.fromkeys(p.group for p in points))
    for ax, s in zip(axes[0], shown):
        for g in groups:
            pts = [p for p in points if p.group == g and p.subset == s]
            if not pts:
                continue
            label = " / ".join(g) if g else metric_label(metric)
            ax.errorbar([p.docs for p in pts], [p.mean for p in pts], yerr=[p.std for p in pts], marker="o", capsize=3, label=label)
        xs = sorted({round(p.docs) for p in points if p.subset == s})
        ax.set_xscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel("documents in the corpus")
        ax.set_ylabel(f"{metric_label(metric)} (%)")
        ax.set_title(s)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title=" / ".join(HEADERS.get(k, k) for k in group_keys) or None, title_fontsize=8)
    fig.suptitle(f"{metric_label(metric)} vs corpus size (mean ± std over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- the report -----------------------------------------------------------------------------------


@dataclass
class ReportResult:
    out_dir: Path
    files: list[Path]
    tables: dict[str, Table]
    logged_to: str | None = None


def _common_k(runs: Sequence[RunInfo]) -> int:
    ks = {r.params.get("k") for r in runs}
    if len(ks) == 1:
        (k,) = ks
        if k is not None and k.isdigit():
            return int(k)
    return 3


def make_report(target: Target, out_dir: Path, source: CellSource, k: int | None = None, n_boot: int = 2000,
                seed: int = 0, tables: Sequence[str] = ("auto",)) -> ReportResult:
    runs = target.runs
    k = k or _common_k(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    subsets = find_subsets(runs)
    files: list[Path] = []
    built: dict[str, Table] = {}
    sections = [f"# T²-RAGBench report: {target.title}", "",
                f"{len(runs)} run(s); generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; "
                f"keys that differ between runs: {', '.join(swept_keys(runs)) or 'none'}.", ""]
    sections += [f"Note: {n}" for n in target.notes]
    want = set(tables)
    if want - {"auto", "table3", "table4"}:
        raise ReportError(f"--tables: unknown {sorted(want - {'auto', 'table3', 'table4'})}; allowed: auto, table3, table4")
    auto = "auto" in want

    t3_metrics = ["nm", f"mrr_at_{k}"]
    t3 = build_table("table3", f"Table 3 layout: Number Match and MRR@{k}", runs, label_keys(runs, ["generator", "rag_method"]),
                     subsets, t3_metrics, source)
    if auto or "table3" in want:
        add_deltas(t3, t3_metrics, source, n_boot, seed)
        built["table3"] = t3

    has_embedder = any("embedder" in r.overrides for r in runs) or "embedder" in swept_keys(runs)
    if "table4" in want or (auto and has_embedder):
        t4_metrics = ["recall_at_1", "recall_at_5", "mrr_at_5"]
        t4 = build_table("table4", "Table 4 layout: embedders, R@1, R@5 and MRR@5", runs, label_keys(runs, ["embedder"]),
                         subsets, t4_metrics, source)
        add_deltas(t4, ["mrr_at_5", "recall_at_1"], source, n_boot, seed)
        built["table4"] = t4

    for name, t in built.items():
        md = render_markdown(t)
        sections.append(md)
        (out_dir / f"{name}.md").write_text(md, encoding="utf-8")
        write_csv(t, out_dir / f"{name}.csv")
        files += [out_dir / f"{name}.md", out_dir / f"{name}.csv"]
        png = out_dir / f"{name}_bars.png"
        if plot_bars(t, png):
            files.append(png)
            sections.append(f"![{name}]({png.name})\n")
        else:
            sections.append(f"(no bar plot: {len(t.runs)} rows; at most {MAX_BAR_ROWS} are drawn)\n")

    sizes = {r.label("dataset.corpus_size") for r in runs}
    if len(sizes) > 1 and "-" not in sizes:
        metric = f"mrr_at_{k}"
        gkeys, points = corpus_curve(runs, t3.keys, subsets, metric, source)
        if points:
            md = render_curve(gkeys, points, metric)
            sections.append(md)
            (out_dir / "corpus_size.md").write_text(md, encoding="utf-8")
            write_curve_csv(gkeys, points, metric, out_dir / "corpus_size.csv")
            png = out_dir / f"corpus_size_{metric}.png"
            plot_curve(gkeys, points, metric, subsets, png)
            sections.append(f"![corpus size]({png.name})\n")
            files += [out_dir / "corpus_size.md", out_dir / "corpus_size.csv", png]

    report = out_dir / "report.md"
    report.write_text("\n".join(sections), encoding="utf-8")
    files.insert(0, report)
    return ReportResult(out_dir, files, built)


def log_report(client: Any, target: Target, result: ReportResult) -> str:
    """Artifacts under ``report/`` of the parent run, or of a new ``report`` run in the experiment."""
    if target.parent_id is not None:
        run_id = target.parent_id
    else:
        run = client.create_run(target.experiment_id, run_name="report",
                                tags={"t2exp.report": "1", "mlflow.runName": "report"})
        run_id = run.info.run_id
    for f in result.files:
        client.log_artifact(run_id, str(f), "report")
    if target.parent_id is None:
        client.set_terminated(run_id, "FINISHED")
    return run_id


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m t2exp.report", description="Paper-style tables and plots from a sweep's MLflow runs.")
    p.add_argument("target", help="a sweep's parent run id, or an MLflow experiment name")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default {DEFAULT_TRACKING_URI}")
    p.add_argument("--out", type=Path, help="output directory (default outputs/reports/<target>)")
    p.add_argument("--k", type=int, help="MRR@k of the Table 3 layout (default: the runs' k when they share one, else 3)")
    p.add_argument("--tables", default="auto", help="auto (table3, + table4 for embedder sweeps) or a list: table3,table4")
    p.add_argument("--n-boot", type=int, default=2000, help="resamples / sign patterns for 'Δ vs best' (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep stderr to our lines
    try:
        from mlflow.tracking import MlflowClient

        if args.k is not None and args.k < 1:
            raise ReportError("--k must be >= 1")
        client = MlflowClient(tracking_uri=args.tracking_uri)
        target = resolve_target(client, args.target)
        out = args.out or PROJECT_ROOT / "outputs" / "reports" / re.sub(r"[^A-Za-z0-9_.-]+", "_", args.target)
        source = CellSource(lambda run_id: load_run_predictions(client, run_id))
        result = make_report(target, out, source, k=args.k, n_boot=args.n_boot, seed=args.seed,
                             tables=[t.strip() for t in args.tables.split(",")])
        if not args.no_log:
            result.logged_to = log_report(client, target, result)
    except T2ExpError as exc:
        print(f"t2exp.report: error: {exc}", file=sys.stderr)
        return 2
    print((result.out_dir / "report.md").read_text(encoding="utf-8"))
    print("files:\n" + "\n".join(f"  {f}" for f in result.files), file=sys.stderr)
    if result.logged_to:
        print(f"logged under report/ of MLflow run {result.logged_to}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
