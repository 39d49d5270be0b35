"""Report, render: bar plots of a table and the corpus-size curve (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.reporting.render import HEADERS
from t2exp.evaluation.reporting.tables import AVG, CurvePoint, Table

MAX_BAR_ROWS = 16


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def series_colours(n: int) -> list[Any]:
    """``n`` distinct colours: tab10 up to 10 series, tab20 up to 20 (``MAX_BAR_ROWS``), then a
    continuous map sampled evenly."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["turbo"](i / (n - 1)) for i in range(n)]


def _legend_width(labels: Sequence[str], title: str) -> float:
    """Inches a one-column legend of ``labels`` at font size 8 takes (room the figure adds for it)."""
    chars = max([len(title), *(len(label) + 4 for label in labels)], default=0)
    return 0.4 + 0.065 * chars


def _outside_legend(fig: Any, handles: Sequence[Any], labels: Sequence[str], title: str) -> None:
    """One legend for the whole figure, right of the panels (constrained layout makes room for it)."""
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, title=title or None, title_fontsize=8)


def bars_figure(t: Table) -> Any:
    """The figure of :func:`plot_bars`: one panel per metric, groups = subsets + Avg, one bar (with
    its CI) per row, a colour per row; the legend right of the panels."""
    plt = _pyplot()
    metrics = list(dict.fromkeys(m for _, m in t.columns))
    labels = [" / ".join(r.label(k) for k in t.keys) for r in t.runs]
    title = " / ".join(HEADERS.get(k, k) for k in t.keys)
    panel = max(4.0, 0.45 * len(t.runs) + 2.5)
    fig, axes = plt.subplots(
        1, len(metrics), squeeze=False, layout="constrained", figsize=(panel * len(metrics) + _legend_width(labels, title), 4.2)
    )
    width = 0.8 / len(t.runs)
    colours = series_colours(len(t.runs))
    for ax, metric in zip(axes[0], metrics, strict=True):
        subsets = [s for s, m in t.columns if m == metric]
        for i, (r, label) in enumerate(zip(t.runs, labels, strict=True)):
            xs, ys, err_lo, err_hi = [], [], [], []
            for j, s in enumerate(subsets):
                c = t.cells[(r.run_id, s, metric)]
                if c.mean is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(c.mean)
                err_lo.append(c.mean - c.low if c.low is not None else 0.0)
                err_hi.append(c.high - c.mean if c.high is not None else 0.0)
            ax.bar(xs, ys, width=width, yerr=[err_lo, err_hi], capsize=2, label=label, color=colours[i])
        ax.set_xticks(range(len(subsets)))
        ax.set_xticklabels(["Avg" if s == AVG else s for s in subsets])
        ax.set_ylabel(f"{metric_label(metric)} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(metric_label(metric))
        ax.grid(axis="y", alpha=0.3)
    handles, shown = axes[0][0].get_legend_handles_labels()
    _outside_legend(fig, handles, shown, title)
    return fig


def plot_bars(t: Table, path: Path) -> bool:
    """:func:`bars_figure` as a PNG; False (nothing written) for no rows, no metric or more than ``MAX_BAR_ROWS`` rows."""
    if not t.runs or not t.columns or len(t.runs) > MAX_BAR_ROWS:
        return False
    plt = _pyplot()
    fig = bars_figure(t)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def curve_figure(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, subsets: Sequence[str]) -> Any:
    """The figure of :func:`plot_curve`: a panel per subset, a line (mean ± std over seeds) per group."""
    plt = _pyplot()
    shown = [s for s in subsets if any(p.subset == s for p in points)]
    groups = list(dict.fromkeys(p.group for p in points))
    labels = [" / ".join(g) if g else metric_label(metric) for g in groups]
    title = " / ".join(HEADERS.get(k, k) for k in group_keys)
    fig, axes = plt.subplots(
        1, len(shown), squeeze=False, layout="constrained", figsize=(4.5 * len(shown) + _legend_width(labels, title), 4.0)
    )
    colours = series_colours(len(groups))
    for ax, s in zip(axes[0], shown, strict=True):
        for colour, g, label in zip(colours, groups, labels, strict=True):
            pts = [p for p in points if p.group == g and p.subset == s]
            if pts:
                ax.errorbar(
                    [p.docs for p in pts],
                    [p.mean for p in pts],
                    yerr=[p.std for p in pts],
                    marker="o",
                    capsize=3,
                    label=label,
                    color=colour,
                )
        xs = sorted({round(p.docs) for p in points if p.subset == s})
        ax.set_xscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel("documents in the corpus")
        ax.set_ylabel(f"{metric_label(metric)} (%)")
        ax.set_title(s)
        ax.grid(alpha=0.3)
    handles = {lab: h for ax in axes[0] for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)}
    _outside_legend(fig, list(handles.values()), list(handles), title)
    fig.suptitle(f"{metric_label(metric)} vs corpus size (mean ± std over seeds)", fontsize=10)
    return fig


def plot_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, subsets: Sequence[str], path: Path) -> None:
    plt = _pyplot()
    fig = curve_figure(group_keys, points, metric, subsets)
    fig.savefig(path, dpi=120)
    plt.close(fig)
