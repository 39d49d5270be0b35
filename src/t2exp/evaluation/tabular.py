"""The one results-table renderer: how a metric value is written (percent, one decimal, its 95 %
CI in brackets) and how rows become a Markdown or an aligned terminal table. A run's closing
summary, ``t2exp score``, the report's tables, the ladder, the tuning table and the error
breakdown all write through it, so one number reads the same wherever it is shown.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

DECIMALS = 1  # percent with one decimal: the paper's tables and every t2exp table
MISSING = "–"


def value(mean: float | None, low: float | None = None, high: float | None = None, *, signed: bool = False) -> str:
    """``41.7 [35.0, 48.3]``; ``–`` for no value; the CI only when both ends are known."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return MISSING
    sign = "+" if signed else ""
    text = f"{mean:{sign}.{DECIMALS}f}"
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:{sign}.{DECIMALS}f}, {high:{sign}.{DECIMALS}f}]"
    return text


def _labels(left: int | Collection[int], width: int) -> list[bool]:
    """Which columns are labels (left-aligned): the first ``left``, or the indices ``left`` names."""
    return [i < left if isinstance(left, int) else i in left for i in range(width)]


def markdown(head: Sequence[str], rows: Sequence[Sequence[str]], left: int | Collection[int] = 1) -> str:
    """A Markdown table: label columns (the first ``left``, or the indices it names) left-aligned,
    the others, numbers, right-aligned."""
    rule = ["---" if label else "---:" for label in _labels(left, len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def aligned(head: Sequence[str], rows: Sequence[Sequence[str]], left: int | Collection[int] = 1) -> str:
    """The same table as aligned text for a terminal (labels left, numbers right)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    labels = _labels(left, len(head))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if label else c.rjust(w) for c, w, label in zip(cells, widths, labels, strict=True))

    return "\n".join([line(head), *(line(r) for r in rows)])
