"""Paper-style tables and plots from MLflow runs (``t2exp report TARGET`` is :mod:`t2exp.cli.report`;
:func:`report` is the Python API).

TARGET is a sweep's parent run id (its FINISHED child runs) or an experiment name (every FINISHED
run of the experiment that is neither a sweep parent nor a report; one run per config cell, the
newest). Written to ``--out`` (default ``outputs/reports/<target>`` under the current directory)
and logged as artifacts under ``report/`` of the parent run, or of a new run named ``report`` for
an experiment:

- ``table3.md|csv``: rows generator x rag_method (+ every other key that differs between the
  runs, e.g. embedder, k, dataset.corpus_size); columns NM and MRR@k per subset and the
  question-weighted average, each with its 95 % bootstrap CI, and "Δ vs best": the paired
  difference to the best row (``--baseline``: the row it names) on the questions both answered
  (paired bootstrap CI, sign-flip permutation p; :mod:`t2exp.evaluation.paired`) with that p
  Holm–Bonferroni-corrected over the rows compared ("p (Holm, m=7)"; :func:`t2exp.evaluation.stats.holm`).
- ``ranks.md|csv`` when the runs have NM: NM by where the gold document ranked (rank 1, ranks
  2..k, not in the top k), per run and subset (:mod:`t2exp.evaluation.reporting.ranks`).
- ``pairs.md|csv`` with ``--pairs``: every two rows compared, Holm-corrected over all pairs.
- ``readings.md|csv`` when the runs differ in ``protocol`` or follow the authors' (``protocol=paper``):
  rows rag_method x protocol; per subset NM and MRR@k in both orders, and for the weighted average
  NM, NM-bare, NM-strict, MRR@k and R@1 in both orders and R@5 (``--tables readings`` for any runs).
- ``table4.md|csv`` when the runs set the embedder (an embedder sweep): rows embedder; columns
  R@1, R@5, MRR@5 per subset.
- ``corpus_size.md|csv`` and ``corpus_size_mrr_at_<k>.png`` when the runs differ in
  ``dataset.corpus_size``: MRR@k against the number of indexed documents, mean ± std over the
  other varying keys (the seeds).
- ``ladder.md|csv`` when the runs set ``rung`` (``+rung=<name>``, conf/rung/; ``+experiment=beyond``):
  the ablation ladder, each rung with CIs and its paired Δ (p) against the rung before it.
- ``tuning.md|csv`` when runs on held-out questions (``dataset.fold_role=eval``) have a twin on the
  questions they were tuned on (``fold_role=tune``, same config otherwise): both side by side.
- ``table3_bars.png``, ``table4_bars.png``: grouped bars per subset with the CIs.

The run the report is logged to (the parent, or the ``report`` run) carries the Table 3 layout with
a link to each cell as its MLflow description (``mlflow.note.content``).

Every number is a child's logged metric (``<subset>/<metric>`` and its ``_ci_low/_ci_high``),
copied exactly into the CSV. Only a retrieval metric a run did not log (MRR@5 of a k=3 run) is
recomputed from its ``predictions.jsonl`` by the app's evaluator (:mod:`t2exp.evaluation.metrics`)
and marked with †.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from t2exp.config.schema import Config
from t2exp.evaluation.paired import load_run_predictions
from t2exp.evaluation.reporting.ladder import build_ladder, render_ladder, write_ladder_csv
from t2exp.evaluation.reporting.pairs import build_pairs, render_pairs, write_pairs_csv
from t2exp.evaluation.reporting.plots import MAX_BAR_ROWS, plot_bars, plot_curve
from t2exp.evaluation.reporting.ranks import build_ranks, render_ranks, write_ranks_csv
from t2exp.evaluation.reporting.render import (
    HEADERS,
    render_curve,
    render_headline,
    render_markdown,
    write_csv,
    write_curve_csv,
)
from t2exp.evaluation.reporting.runs import ReportError, RunInfo, Target, resolve_target
from t2exp.evaluation.reporting.tables import (
    CellSource,
    Table,
    add_deltas,
    build_table,
    corpus_curve,
    find_subsets,
    label_keys,
    readings_columns,
    swept_keys,
)
from t2exp.evaluation.reporting.tuning import build_tuning, render_tuning, write_tuning_csv
from t2exp.evaluation.stats import CI_SEED, N_BOOT
from t2exp.evaluation.tabular import md_escape
from t2exp.infra.contained import inside, safe_segment
from t2exp.infra.mlflow_store import Tag, open_client
from t2exp.infra.paths import default_tracking_uri, work_dir

TABLES = ("auto", "table3", "table4", "readings")


@dataclass
class ReportResult:
    out_dir: Path
    files: list[Path]
    tables: dict[str, Table]
    logged_to: str | None = None
    description: str = ""  # the headline Markdown logged as the run's MLflow description


def _common_k(runs: Sequence[RunInfo]) -> int:
    ks = {r.params.get("k") for r in runs}
    if len(ks) == 1:
        (k,) = ks
        if k is not None and k.isdigit():
            return int(k)
    return Config.k


def make_report(
    target: Target,
    out_dir: Path,
    source: CellSource,
    k: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
    tables: Sequence[str] = ("auto",),
    baseline: str | None = None,
    pairs: bool = False,
) -> ReportResult:
    """Every table ``tables`` asks for (``auto``: those the runs call for), written to ``out_dir``
    as Markdown, CSV and plots, and ``report.md`` holding them all. ``baseline``: the row the Δ
    columns compare with (:func:`~t2exp.evaluation.reporting.tables.select_baseline`; default the
    best); ``pairs``: every two rows compared too (``pairs.md|csv``)."""
    runs = target.runs
    k = k or _common_k(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    subsets = find_subsets(runs)
    want = set(tables)
    if want - set(TABLES):
        raise ReportError(f"--tables: unknown {sorted(want - set(TABLES))}; allowed: {', '.join(TABLES)}")
    files: list[Path] = []
    sections = [
        f"# T²-RAGBench report: {md_escape(target.title)}",
        "",
        f"{len(runs)} run(s); generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; "
        f"keys that differ between runs: {md_escape(', '.join(swept_keys(runs)) or 'none')}.",
        "",
    ]
    sections += [f"Note: {n}" for n in target.notes]
    t3, built = _paper_tables(runs, subsets, k, want, source, n_boot, seed, baseline)
    ladder = build_ladder(runs, subsets, k, source, n_boot, seed)
    if ladder is not None:
        sections.append(_write_section(out_dir, "ladder", render_ladder(ladder), lambda p: write_ladder_csv(ladder, p), files))
    tuning = build_tuning(runs, subsets, f"mrr_at_{k}", source)
    if tuning is not None:
        sections.append(_write_section(out_dir, "tuning", render_tuning(tuning), lambda p: write_tuning_csv(tuning, p), files))
    for name, t in built.items():
        sections += _write_table(out_dir, name, t, files)
    sections += _extra_sections(out_dir, t3, subsets, k, source, n_boot, seed, pairs, files)
    sizes = {r.label("dataset.corpus_size") for r in runs}
    if len(sizes) > 1 and "-" not in sizes:
        sections += _corpus_size_section(out_dir, runs, t3.keys, subsets, f"mrr_at_{k}", source, files)
    report = out_dir / "report.md"
    report.write_text("\n".join(sections), encoding="utf-8")
    files.insert(0, report)
    return ReportResult(out_dir, files, built, description=_description(target, t3, files))


def _extra_sections(
    out_dir: Path, t3: Table, subsets: list[str], k: int, source: CellSource, n_boot: int, seed: int, pairs: bool, files: list[Path]
) -> list[str]:
    """NM by the gold document's rank (runs with NM), and with ``pairs`` every two rows compared."""
    out = []
    ranks = build_ranks(t3.runs, t3.keys, subsets, k, source)
    if ranks is not None:
        out.append(_write_section(out_dir, "ranks", render_ranks(ranks, HEADERS), lambda p: write_ranks_csv(ranks, p), files))
    if pairs:
        if t3.primary is None:  # --tables without table3: its rows were not compared with a baseline
            add_deltas(t3, ["nm", f"mrr_at_{k}"], source, n_boot, seed)
        all_pairs = build_pairs(t3, source, n_boot, seed)
        if all_pairs is not None:
            out.append(_write_section(out_dir, "pairs", render_pairs(all_pairs, HEADERS), lambda p: write_pairs_csv(all_pairs, p), files))
    return out


def _description(target: Target, t3: Table, files: list[Path]) -> str:
    """The parent run's (or the report run's) MLflow description: the Table 3 layout with a link
    per cell, and where the rest of the report is."""
    intro = (
        f"**Sweep report** ({md_escape(target.title)}): {len(target.runs)} cell(s); keys that differ: "
        f"{md_escape(', '.join(swept_keys(target.runs)) or 'none')}. Each cell links to its run."
    )
    names = [f.name for f in files]
    plots = [n for n in names if n.endswith(".png")]
    outro = (
        "Artifacts, folder report/: report.md (every table), "
        + ", ".join(n for n in names if n.endswith(".csv"))
        + (f"; plots (shown as images): {', '.join(plots)}" if plots else "")
        + "."
    )
    return render_headline(t3, target.experiment_id, intro, outro)


def _paper_tables(
    runs: Sequence[RunInfo],
    subsets: list[str],
    k: int,
    want: set[str],
    source: CellSource,
    n_boot: int,
    seed: int,
    baseline: str | None = None,
) -> tuple[Table, dict[str, Table]]:
    """The Table 3 layout (always built: the corpus-size curve reads its rows), and the tables
    asked for: table3, table4 (an embedder sweep), readings (a protocol sweep or the authors')."""
    auto = "auto" in want
    built: dict[str, Table] = {}
    t3_metrics = ["nm", f"mrr_at_{k}"]
    t3 = build_table(
        "table3",
        f"Table 3 layout: Number Match and MRR@{k}",
        runs,
        label_keys(runs, ["generator", "rag_method"]),
        subsets,
        t3_metrics,
        source,
    )
    if auto or "table3" in want:
        add_deltas(t3, t3_metrics, source, n_boot, seed, baseline)
        built["table3"] = t3
    has_embedder = any("embedder" in r.overrides for r in runs) or "embedder" in swept_keys(runs)
    if "table4" in want or (auto and has_embedder):
        t4_metrics = ["recall_at_1", "recall_at_5", "mrr_at_5"]
        t4 = build_table(
            "table4", "Table 4 layout: embedders, R@1, R@5 and MRR@5", runs, label_keys(runs, ["embedder"]), subsets, t4_metrics, source
        )
        add_deltas(t4, ["mrr_at_5", "recall_at_1"], source, n_boot, seed, baseline)
        built["table4"] = t4
    protocols = {r.label("protocol") for r in runs}
    if "readings" in want or (auto and (len(protocols) > 1 or "paper" in protocols)):
        rd = build_table(
            "readings",
            f"Metric readings: t2exp's and the authors' (NM variants; MRR@{k} and R@1 in both orders)",
            runs,
            label_keys(runs, ["rag_method", "protocol"]),
            subsets,
            [],
            source,
            columns=readings_columns(subsets, k),
        )
        rd.notes.append(
            "paper order = the retrieved documents re-sorted by their stored dense similarity (the authors' "
            "evaluation); '–' where the method kept no dense scores. NM-bare = bare float() with the "
            "authors' small-gold rule; NM-strict = relative error < 1 % with no power-of-ten shift."
        )
        built["readings"] = rd
    return t3, built


def _write_table(out_dir: Path, name: str, t: Table, files: list[Path]) -> list[str]:
    """``<name>.md|csv`` and its bar plot (not for readings: eight metrics side by side); the
    report's sections for it."""
    md = render_markdown(t)
    (out_dir / f"{name}.md").write_text(md, encoding="utf-8")
    write_csv(t, out_dir / f"{name}.csv")
    files += [out_dir / f"{name}.md", out_dir / f"{name}.csv"]
    if name == "readings":
        return [md]
    png = out_dir / f"{name}_bars.png"
    if plot_bars(t, png):
        files.append(png)
        return [md, f"![{name}]({png.name})\n"]
    return [md, f"(no bar plot: {len(t.runs)} rows; at most {MAX_BAR_ROWS} are drawn)\n"]


def _corpus_size_section(
    out_dir: Path, runs: Sequence[RunInfo], keys: list[str], subsets: list[str], metric: str, source: CellSource, files: list[Path]
) -> list[str]:
    """``metric`` against the number of indexed documents (runs that differ in dataset.corpus_size)."""
    gkeys, points = corpus_curve(runs, keys, subsets, metric, source)
    if not points:
        return []
    md = render_curve(gkeys, points, metric)
    (out_dir / "corpus_size.md").write_text(md, encoding="utf-8")
    write_curve_csv(gkeys, points, metric, out_dir / "corpus_size.csv")
    png = out_dir / f"corpus_size_{metric}.png"
    plot_curve(gkeys, points, metric, subsets, png)
    files += [out_dir / "corpus_size.md", out_dir / "corpus_size.csv", png]
    return [md, f"![corpus size]({png.name})\n"]


def log_report(client: Any, target: Target, result: ReportResult) -> str:
    """Artifacts under ``report/`` of the parent run, or of a new ``report`` run in the experiment
    (each file itself: a ``.png`` shows as an image in the artifact view), and the headline as
    that run's description (``mlflow.note.content``, rendered as Markdown on the run's page)."""
    if target.parent_id is not None:
        run_id = target.parent_id
    else:
        run = client.create_run(target.experiment_id, run_name="report", tags={Tag.REPORT: "1", "mlflow.runName": "report"})
        run_id = run.info.run_id
    for f in result.files:
        client.log_artifact(run_id, str(f), "report")
    if result.description:
        client.set_tag(run_id, "mlflow.note.content", result.description)
    if target.parent_id is None:
        client.set_terminated(run_id, "FINISHED")
    return run_id


def report_parent(tracking_uri: str, parent_id: str, work: Path | None = None) -> ReportResult:
    """The report of a sweep's parent run, logged under ``report/`` of that run (what a sweep's
    end does on its own; ``t2exp report PARENT_ID`` does the same by hand); its files go to
    ``outputs/reports/<parent id>`` under ``work`` (the sweep's ``paths.work``; default the
    current directory)."""
    client = open_client(tracking_uri)
    target = resolve_target(client, parent_id)
    source = CellSource(lambda run_id: load_run_predictions(client, run_id))
    result = make_report(target, default_out_dir(parent_id, work), source)
    result.logged_to = log_report(client, target, result)
    return result


def _write_section(out_dir: Path, name: str, md: str, write_csv: Callable[[Path], None], files: list[Path]) -> str:
    """``<name>.md`` and ``<name>.csv`` of one table, added to ``files``; returns the Markdown."""
    (out_dir / f"{name}.md").write_text(md, encoding="utf-8")
    write_csv(out_dir / f"{name}.csv")
    files += [out_dir / f"{name}.md", out_dir / f"{name}.csv"]
    return md


def default_out_dir(target: str, work: Path | None = None) -> Path:
    """``outputs/reports/<target>`` under ``work`` (default the current directory), ``target`` made
    one plain folder name (an experiment named ``..`` or ``a/b`` is written under
    ``outputs/reports`` too)."""
    reports = (work if work is not None else work_dir()) / "outputs" / "reports"
    return inside(reports / safe_segment(target), reports, action="write")


def report(
    target: str,
    out: str | Path | None = None,
    *,
    tracking_uri: str | None = None,
    k: int | None = None,
    tables: str | Sequence[str] = "auto",
    n_boot: int = N_BOOT,
    seed: int = CI_SEED,
    log: bool = True,
    baseline: str | None = None,
    pairs: bool = False,
) -> ReportResult:
    """The report of ``target`` (a sweep's parent run id or an experiment name) written to ``out``
    (default ``outputs/reports/<target>`` under the current directory) and, with ``log``, logged to
    MLflow. ``baseline``: the row the Δ columns compare with (a run id or ``key=value``
    overrides; default the best row); ``pairs``: every two rows compared too. Raises
    :class:`ReportError` (one line) when there is nothing to report or ``baseline`` names no
    single row."""
    if k is not None and k < 1:
        raise ReportError("--k must be >= 1")
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise ReportError(f"--out {out}: a file, not a folder; give a folder for the report's files (it is made when missing)")
    client = open_client(tracking_uri or default_tracking_uri(), "--tracking-uri", create=False)  # the runs' store: never a new one
    resolved = resolve_target(client, target)
    source = CellSource(lambda run_id: load_run_predictions(client, run_id))
    names = [t.strip() for t in tables.split(",")] if isinstance(tables, str) else list(tables)
    result = make_report(
        resolved,
        Path(out) if out is not None else default_out_dir(target),
        source,
        k=k,
        n_boot=n_boot,
        seed=seed,
        tables=names,
        baseline=baseline,
        pairs=pairs,
    )
    if log:
        result.logged_to = log_report(client, resolved, result)
    return result
