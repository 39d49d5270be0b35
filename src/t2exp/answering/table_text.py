"""How the generator sees a document's tables (``context.tables``): ``markdown`` as they are, or
``rows``: each data row one line naming every value by its column
(``net cash used ...: 2010 = -319 ( 319 ); 2009 = -1518 ( 1518 )``), so no ``|`` counting is needed.

A table is a run of Markdown rows (:func:`t2exp.answering.context.split`). Its header: the rows above
``|---|`` plus those right below with an empty first cell (TAT-DQA), joined per column and aligned at
their right end; a single-text header row becomes a caption line. FinQA's pandas index column is
dropped; the label column's header stays above the rows. Tables without separator or data are left as is.
"""

from __future__ import annotations

import re

FORMATS = ("markdown", "rows")
_SEPARATOR_CELL = re.compile(r"^:?-{2,}:?$")


def cells(row: str) -> list[str]:
    """The cells of one Markdown row, stripped (``| a | b |`` → ``["a", "b"]``)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") else row
    return [c.strip() for c in row.split("|")]


def _is_separator(row: list[str]) -> bool:
    return bool(row) and all(_SEPARATOR_CELL.match(c) for c in row if c) and any(row)


def _drop_index(header: list[list[str]], body: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """Without the pandas index column: empty in every header row, 0, 1, 2, ... down the body."""
    if header and body and all(h and not h[0] for h in header) and [r[0] for r in body] == [str(i) for i in range(len(body))]:
        return [h[1:] for h in header], [r[1:] for r in body]
    return header, body


def _column_names(header: list[list[str]], width: int) -> list[str]:
    """One name per column of a ``width``-wide body: each header row aligned at its right end,
    the non-empty cells of a column joined top to bottom."""
    names = [""] * width
    for row in header:
        aligned = ([""] * (width - len(row)) + row)[-width:] if width else []
        names = [f"{n} {c}".strip() if c else n for n, c in zip(names, aligned, strict=True)]
    return names


def render_rows(lines: list[str]) -> str:
    """One Markdown table (its lines, a caption possibly before the first ``|``) as labelled rows."""
    caption = ""
    first = lines[0]
    if not first.lstrip().startswith("|") and "|" in first:
        caption, first = first[: first.index("|")].strip(), first[first.index("|") :]
    rows = [cells(line) for line in [first, *lines[1:]] if line.strip()]
    sep = next((i for i, r in enumerate(rows) if _is_separator(r)), None)
    if sep is None:
        return "\n".join(lines)
    header, body = rows[:sep], rows[sep + 1 :]
    while body and body[0] and not body[0][0] and len(body) > 1:
        header.append(body.pop(0))
    header, body = _drop_index(header, body)
    if not body:
        return "\n".join(lines)
    out = [caption] if caption else []
    # a header row with one text in it spans the columns ("Year Ended December 31", "(In millions)"): a caption
    spanning = [r for r in header if sum(1 for c in r if c) == 1]
    out += [next(c for c in r if c) for r in spanning]
    header = [r for r in header if r not in spanning]
    width = max(len(r) for r in body)
    names = _column_names(header, width)
    if names and names[0]:
        out.append(names[0])  # the label column's header: "( in millions )", a unit or a caption
    for row in body:
        row = row + [""] * (width - len(row))
        label, values = row[0], [(n, v) for n, v in zip(names[1:], row[1:], strict=True) if v]
        if not values:
            out.append(label)
            continue
        shown = "; ".join(f"{n} = {v}" if n else v for n, v in values)
        out.append(f"{label}: {shown}" if label else shown)
    return "\n".join(line for line in out if line)


def row_parts(line: str) -> tuple[str, str, str] | None:
    """``(text before, | the row |, text after)`` of a line holding a Markdown row (two or more
    ``|``; FinQA glues prose to its table on both sides), else None. The one rule of what a table
    line is, for :func:`with_rows` and :func:`t2exp.answering.context.split`."""
    first, last = line.find("|"), line.rfind("|")
    if first == -1 or first == last:
        return None
    return line[:first], line[first : last + 1], line[last + 1 :]


def with_rows(document: str) -> str:
    """``document`` with every Markdown table rendered by :func:`render_rows`; the rest of each
    line around a table (FinQA glues prose to it with ``_``) stays, on lines of its own."""
    lines = document.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if row_parts(lines[i]) is None:
            out.append(lines[i])
            i += 1
            continue
        run, parts = [], []
        while i < len(lines) and (part := row_parts(lines[i])) is not None:
            run.append(lines[i])
            parts.append(part)
            i += 1
        head = parts[0][0].strip().rstrip("_").strip()
        tail = parts[-1][2].strip().lstrip("_").strip()
        rows = [run[0][len(parts[0][0]) :], *run[1:]]  # the first row without the text before it,
        rows[-1] = rows[-1][: rows[-1].rindex("|") + 1]  # the last without the text after it
        if head:
            out.append(head)
        out.append(render_rows(rows))
        if tail:
            out.append(tail)
    return "\n".join(out)
