"""The one results-table renderer: how a metric value is written (percent, one decimal, its 95 %
CI in brackets) and how rows become a Markdown or an aligned terminal table. A run's closing
summary, ``t2exp score``, the report's tables, the ladder, the tuning table and the error
breakdown all write through it, so one number reads the same wherever it is shown. Text from runs
and configs (names, swept values, keys) goes into Markdown through :func:`md_escape` alone, and
every CSV file t2exp writes goes through :func:`write_csv` (no cell a spreadsheet would run).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from t2exp.errors import one_line
from t2exp.infra.cache import atomic_write_text

DECIMALS = 1  # percent with one decimal: the paper's tables and every t2exp table
MISSING = "–"
# what a cell cost, as its run logs it (docs/evaluation.md, "What a cell costs"): the metric, its
# column's heading and decimals in the report's Table 3 and the explorer's headline
COSTS = (
    ("questions", "Questions", 0),
    ("prompt_tokens", "Prompt tokens", 0),
    ("completion_tokens", "Completion tokens", 0),
    ("generate_seconds", "Generate s", 1),
    ("gpu_seconds", "GPU s", 1),
    ("json_valid_share", "JSON valid %", 1),
    ("cost_usd", "USD", 4),
)


def costs_logged(metrics: Iterable[Mapping[str, float]]) -> list[tuple[str, str, int]]:
    """The :data:`COSTS` some run logged, of runs that answered (a retrieval-only sweep has none)."""
    metrics = list(metrics)
    if not any("prompt_tokens" in m for m in metrics):
        return []
    return [c for c in COSTS if any(c[0] in m for m in metrics)]


def cost_text(metrics: Mapping[str, float], cost: tuple[str, str, int]) -> str:
    """One of a run's :data:`COSTS` as its column shows it."""
    value = metrics.get(cost[0])
    return MISSING if value is None else f"{value:.{cost[2]}f}"


def value(mean: float | None, low: float | None = None, high: float | None = None, *, signed: bool = False) -> str:
    """``41.7 [35.0, 48.3]``; ``–`` for no value; the CI only when both ends are known."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return MISSING
    sign = "+" if signed else ""
    text = f"{mean:{sign}.{DECIMALS}f}"
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:{sign}.{DECIMALS}f}, {high:{sign}.{DECIMALS}f}]"
    return text


def format_p(p: float) -> str:
    """A p-value as every comparison table writes it: ``<0.001``, ``0.042`` or ``nan``."""
    if math.isnan(p):
        return "nan"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def p_text(p: float) -> str:
    """``p<0.001`` or ``p=0.042``: a p-value as a sentence shows it."""
    text = format_p(p)
    return "p" + (text if text.startswith("<") else f"={text}")


class Markdown(str):
    """Text a renderer already wrote as Markdown (a link to a run, its name escaped):
    :func:`markdown` puts it in a cell as it is."""


# what Markdown reads as syntax in a line of text: a backslash, a table's |, code, emphasis and
# strikethrough marks, an HTML tag, comment or autolink (<, then a letter, /, ! or ?), an entity
# (&name; &#123;), a _ at a word's edge (snake_case stays as it is), and every [ and ] of a text
# where they could make a link: a ]( or ][, or brackets that do not pair up (a CI [1.0, 2.0] stays)
_SYNTAX = r"[\\|`*~]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"


def _brackets_pair(text: str) -> bool:
    """Every ``[`` closed by a later ``]``, and no ``](`` or ``][``: brackets that make no link."""
    depth = 0
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0 and "](" not in text and "][" not in text


def md_escape(text: object) -> str:
    """``text`` as Markdown that reads as that text: on one line, a backslash before each character
    Markdown would take as syntax (a ``|`` splitting a table's row, a link, an image, HTML,
    emphasis); numbers as t2exp writes them are left as they are. The one escaping helper of every
    Markdown writer (table cells through :func:`markdown`, names in headings and descriptions)."""
    line = one_line(text)
    syntax = _SYNTAX if _brackets_pair(line) else _SYNTAX + r"|[\[\]]"
    return re.sub(syntax, lambda m: "\\" + m.group(0), line)


def _labels(left: int | Collection[int], width: int) -> list[bool]:
    """Which columns are labels (left-aligned): the first ``left``, or the indices ``left`` names."""
    return [i < left if isinstance(left, int) else i in left for i in range(width)]


def markdown(head: Sequence[str], rows: Sequence[Sequence[str]], left: int | Collection[int] = 1) -> str:
    """A Markdown table: label columns (the first ``left``, or the indices it names) left-aligned,
    the others, numbers, right-aligned; every cell and heading :func:`md_escape`-d but a
    :class:`Markdown` one."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c if isinstance(c, Markdown) else md_escape(c) for c in cells) + " |"

    rule = ["---" if label else "---:" for label in _labels(left, len(head))]
    return "\n".join([line(head), "|" + "|".join(rule) + "|", *(line(r) for r in rows)])


def aligned(head: Sequence[str], rows: Sequence[Sequence[str]], left: int | Collection[int] = 1) -> str:
    """The same table as aligned text for a terminal (labels left, numbers right)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    labels = _labels(left, len(head))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if label else c.rjust(w) for c, w, label in zip(cells, widths, labels, strict=True))

    return "\n".join([line(head), *(line(r) for r in rows)])


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def sheet_cell(cell: Any) -> Any:
    """A CSV cell a spreadsheet does not run: text starting with = + - @, a tab or a carriage
    return (a model's answer, a question, a swept value) gets a leading ``'``, as OWASP advises
    against CSV injection; numbers, also written as text (``-3.5``), stay as they are."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def write_csv(path: Path, head: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """The one CSV writer: a header row, then ``rows`` (``None`` an empty field), every cell through
    :func:`sheet_cell`; written whole or not at all (an existing file is replaced)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([sheet_cell(c) for c in head])
    w.writerows([sheet_cell(c) for c in row] for row in rows)
    atomic_write_text(path, buf.getvalue())
