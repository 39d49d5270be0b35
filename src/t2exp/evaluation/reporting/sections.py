"""The report's tables, each written as ``<name>.md|csv`` (and its plot) and returned as the
report's Markdown sections: Table 3 and 4, the readings, NM by rank, all pairs, the corpus-size curve."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from t2exp.evaluation import tabular
from t2exp.evaluation.reporting.pairs import build_pairs, render_pairs, write_pairs_csv
from t2exp.evaluation.reporting.plots import MAX_BAR_ROWS, plot_bars, plot_curve
from t2exp.evaluation.reporting.ranks import build_ranks, render_ranks, write_ranks_csv
from t2exp.evaluation.reporting.render import HEADERS, render_curve, render_markdown, write_csv, write_curve_csv
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import (
    CellSource,
    Table,
    add_deltas,
    build_table,
    corpus_curve,
    label_keys,
    readings_columns,
    swept_keys,
)


def paper_tables(
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
    t3_keys = label_keys(runs, ["generator", "rag_method"])
    t3 = build_table("table3", f"Table 3 layout: Number Match and MRR@{k}", runs, t3_keys, subsets, t3_metrics, source)
    t3.costs = tabular.costs_logged(r.metrics for r in runs)
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


def write_table(out_dir: Path, name: str, t: Table, files: list[Path]) -> list[str]:
    """``<name>.md|csv`` and its bar plot (not for readings: eight metrics side by side); the
    report's sections for it."""
    md = write_section(out_dir, name, render_markdown(t), lambda p: write_csv(t, p), files)
    if name == "readings":
        return [md]
    png = out_dir / f"{name}_bars.png"
    if plot_bars(t, png):
        files.append(png)
        return [md, f"![{name}]({png.name})\n"]
    return [md, f"(no bar plot: {len(t.runs)} rows; at most {MAX_BAR_ROWS} are drawn)\n"]


def extra_sections(
    out_dir: Path, t3: Table, subsets: list[str], k: int, source: CellSource, n_boot: int, seed: int, pairs: bool, files: list[Path]
) -> list[str]:
    """NM by the gold document's rank (runs with NM), and with ``pairs`` every two rows compared."""
    out = []
    ranks = build_ranks(t3.runs, t3.keys, subsets, k, source)
    if ranks is not None:
        out.append(write_section(out_dir, "ranks", render_ranks(ranks, HEADERS), lambda p: write_ranks_csv(ranks, p), files))
    if pairs:
        if t3.primary is None:  # --tables without table3: its rows were not compared with a baseline
            add_deltas(t3, ["nm", f"mrr_at_{k}"], source, n_boot, seed)
        all_pairs = build_pairs(t3, source, n_boot, seed)
        if all_pairs is not None:
            out.append(write_section(out_dir, "pairs", render_pairs(all_pairs, HEADERS), lambda p: write_pairs_csv(all_pairs, p), files))
    return out


def corpus_size_section(
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


def write_section(out_dir: Path, name: str, md: str, write_csv: Callable[[Path], None], files: list[Path]) -> str:
    """``<name>.md`` and ``<name>.csv`` of one table, added to ``files``; returns the Markdown."""
    (out_dir / f"{name}.md").write_text(md, encoding="utf-8")
    write_csv(out_dir / f"{name}.csv")
    files += [out_dir / f"{name}.md", out_dir / f"{name}.csv"]
    return md
