"""The report's plots are readable with many cells: the whole legend inside the figure, clear of the
panels, and one colour per series (8 cells, as a 2x4 sweep makes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from t2exp.evaluation.reporting.plots import plot_bars, plot_curve
from t2exp.evaluation.reporting.runs import RunInfo
from t2exp.evaluation.reporting.tables import AVG, CurvePoint, Entry, Table

CELLS = 8


@pytest.fixture
def saved(monkeypatch) -> list[Any]:
    """Every figure the plot functions save (they close it after writing the PNG)."""
    from matplotlib.figure import Figure

    figures: list[Any] = []
    save = Figure.savefig

    def spy(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figures


def _table(n: int) -> Table:
    """``n`` cells of a reproduction-style sweep: method x protocol x generator labels, one metric."""
    runs = [
        RunInfo(
            run_id=f"{i:032x}",
            name=f"cell {i}",
            metrics={},
            overrides={},
            params={"rag_method.name": f"metadata_hybrid_{i}", "protocol.name": "paper", "generator.name": "qwen_coder_1_5b"},
        )
        for i in range(n)
    ]
    columns = [(s, "mrr_at_3") for s in ("FinQA", "TAT-DQA", AVG)]
    cells = {(r.run_id, s, m): Entry(40.0 + 5 * i, 35.0 + 5 * i, 45.0 + 5 * i) for i, r in enumerate(runs) for s, m in columns}
    return Table(name="t", title="t", keys=["rag_method", "protocol", "generator"], runs=runs, columns=columns, cells=cells)


def _colour(handle: Any) -> str:
    """A legend handle's colour: a line's (or a line collection's), a bar's face."""
    from matplotlib.colors import to_hex, to_rgba_array

    colour = handle.get_color() if hasattr(handle, "get_color") else handle.get_facecolor()
    return to_hex(to_rgba_array(colour)[0])


def _check_legend(fig: Any, series: int) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the saved figure, drawn again as it was saved (pyplot closed it)
    fig.set_dpi(120)
    canvas.draw()
    renderer = canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends, "no legend"
    for legend in legends:
        box, page = legend.get_window_extent(renderer), fig.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)
        for ax in fig.axes:  # colours can be matched: no series hidden under the legend
            assert not box.overlaps(ax.get_window_extent(renderer))
        assert len(legend.get_texts()) == series
        assert len({_colour(h) for h in legend.legend_handles}) == series


def test_a_bar_plot_of_eight_cells_shows_its_whole_legend_with_a_colour_each(tmp_path: Path, saved: list[Any]):
    assert plot_bars(_table(CELLS), tmp_path / "bars.png")
    (fig,) = saved
    _check_legend(fig, CELLS)


def test_a_corpus_curve_of_eight_groups_shows_its_whole_legend(tmp_path: Path, saved: list[Any]):
    points = [
        CurvePoint(
            group=(f"metadata_hybrid_{g}",),
            subset=s,
            size=str(d),
            docs=float(d),
            mean=30.0 + g + d / 10,
            std=1.0,
            n=3,
            questions=100.0,
            values=[30.0],
        )
        for g in range(CELLS)
        for s in ("FinQA", "TAT-DQA")
        for d in (25, 100, 299)
    ]
    plot_curve(["rag_method"], points, "mrr_at_3", ["FinQA", "TAT-DQA"], tmp_path / "curve.png")
    (fig,) = saved
    _check_legend(fig, CELLS)
