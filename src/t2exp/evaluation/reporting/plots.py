"""Report, render: bar plots of a table and the corpus-size curve (matplotlib, Agg backend)."""

from __future__ import annotations

import math
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


def plot_bars(t: Table, path: Path) -> bool:
    """One panel per metric; groups = subsets + Avg; one bar (with its CI) per row."""
    if not t.runs or len(t.runs) > MAX_BAR_ROWS:
        return False
    plt = _pyplot()
    metrics = list(dict.fromkeys(m for _, m in t.columns))
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(6.0, 1.3 * len(t.runs) + 4.0) * len(metrics) / 1.6, 4.2), squeeze=False)
    width = 0.8 / len(t.runs)
    for ax, metric in zip(axes[0], metrics, strict=True):
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


def plot_curve(group_keys: Sequence[str], points: Sequence[CurvePoint], metric: str, subsets: Sequence[str], path: Path) -> None:
    plt = _pyplot()
    shown = [s for s in subsets if any(p.subset == s for p in points)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5.0 * len(shown), 4.0), squeeze=False)
    groups = list(dict.fromkeys(p.group for p in points))
    for ax, s in zip(axes[0], shown, strict=True):
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
