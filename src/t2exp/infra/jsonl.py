"""The one reader of JSON Lines files (a run's ``predictions.jsonl``, a submission, a demos pool, a
local data file): one JSON object per line, UTF-8.

Lines are split on ``\\n`` only (a row written with ``ensure_ascii=False`` may hold U+2028 or
U+0085 inside a string, which ``str.splitlines`` would split at); a leading UTF-8 byte-order mark
(what Windows editors write) is skipped; a line that is not UTF-8, not JSON or not an object is
one error naming the file and the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t2exp.errors import DataError, T2ExpError

_BOM = b"\xef\xbb\xbf"


def _line_object(raw: bytes, where: str) -> dict[str, Any]:
    """One line's object; a ``ValueError`` with ``where`` and the fault otherwise."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)") from None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"{where}: not valid JSON (nested too deep)") from None
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object per line, got {type(rec).__name__}")
    return rec


def read_jsonl_objects(
    path: str | Path, *, torn_tail: bool = False, error: type[T2ExpError] = DataError, advice: str = ""
) -> list[dict[str, Any]]:
    """The objects of the JSON Lines file ``path``, blank lines skipped. A bad line raises
    ``error`` with ``<path>: line <n>: <fault>`` (and ``; <advice>`` when given); with
    ``torn_tail`` a bad *last* line (a killed writer's torn write) ends the rows instead."""
    return [rec for _, rec in read_jsonl_numbered(path, torn_tail=torn_tail, error=error, advice=advice)]


def read_jsonl_numbered(
    path: str | Path, *, torn_tail: bool = False, error: type[T2ExpError] = DataError, advice: str = ""
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl_objects` with each object's line number (1-based), for messages that name it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines = data.removeprefix(_BOM).split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    records: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            records.append((n, _line_object(raw, f"{path}: line {n}")))
        except ValueError as exc:
            if torn_tail and n == len(lines):
                break
            raise error(f"{exc}; {advice}" if advice else str(exc)) from None
    return records
