"""Paper-style tables and plots from MLflow runs (``t2exp report TARGET`` is :mod:`t2exp.cli.report`;
:func:`report` is the Python API; the tables: docs/evaluation.md).

TARGET is a sweep's parent run id (its FINISHED child runs) or an experiment name (every FINISHED
run of the experiment that is neither a sweep parent nor a report; one run per config cell, the
newest). Written to ``--out`` (default ``outputs/reports/<target>`` under the current directory)
and logged as artifacts under ``report/`` of the parent run, or of a new run named ``report`` for
an experiment, whose MLflow description is the Table 3 layout with a link to each cell. Every
number is a child's logged metric, copied exactly; only a retrieval metric a run did not log (MRR@5
of a k=3 run) is recomputed from its ``predictions.jsonl`` and marked with †.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from t2exp.config.schema import Config
from t2exp.evaluation.paired import load_run_predictions
from t2exp.evaluation.reporting.ladder import build_ladder, render_ladder, write_ladder_csv
from t2exp.evaluation.reporting.render import render_headline
from t2exp.evaluation.reporting.runs import ReportError, RunInfo, Target, resolve_target
from t2exp.evaluation.reporting.sections import corpus_size_section, extra_sections, paper_tables, write_section, write_table
from t2exp.evaluation.reporting.tables import CellSource, Table, find_subsets, swept_keys
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
    t3, built = paper_tables(runs, subsets, k, want, source, n_boot, seed, baseline)
    ladder = build_ladder(runs, subsets, k, source, n_boot, seed)
    if ladder is not None:
        sections.append(write_section(out_dir, "ladder", render_ladder(ladder), lambda p: write_ladder_csv(ladder, p), files))
    tuning = build_tuning(runs, subsets, f"mrr_at_{k}", source)
    if tuning is not None:
        sections.append(write_section(out_dir, "tuning", render_tuning(tuning), lambda p: write_tuning_csv(tuning, p), files))
    for name, t in built.items():
        sections += write_table(out_dir, name, t, files)
    sections += extra_sections(out_dir, t3, subsets, k, source, n_boot, seed, pairs, files)
    sizes = {r.label("dataset.corpus_size") for r in runs}
    if len(sizes) > 1 and "-" not in sizes:
        sections += corpus_size_section(out_dir, runs, t3.keys, subsets, f"mrr_at_{k}", source, files)
    report = out_dir / "report.md"
    report.write_text("\n".join(sections), encoding="utf-8")
    files.insert(0, report)
    return ReportResult(out_dir, files, built, description=_description(target, t3, files))


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
