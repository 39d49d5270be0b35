"""The questions two runs differ on, as ``t2exp compare`` shows them: a terminal table of the
first ``--show N`` (:mod:`t2exp.evaluation.tabular`, the one table renderer) and ``--out`` files
(``.csv`` or ``.jsonl``) holding every one. The records are
:func:`t2exp.evaluation.questions.question_record`'s; the order is the comparison's (by effect)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from t2exp.errors import T2ExpError, one_line
from t2exp.evaluation import tabular
from t2exp.evaluation.metrics import metric_label
from t2exp.evaluation.questions import QuestionDiff, question_record
from t2exp.infra.cache import atomic_write_text

QUESTION_WIDTH = 48  # characters of a question the terminal table shows
OUT_SUFFIXES = (".csv", ".jsonl")


class ListingError(T2ExpError):
    pass


def shorten(text: Any, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis (:func:`one_line`)."""
    return "" if text is None else one_line(text, width)


def _cell(v: Any) -> str:
    return tabular.MISSING if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _rank(v: int | None) -> str:
    return tabular.MISSING if v is None else ("not retrieved" if v == 0 else str(v))


def render_questions(questions: Sequence[QuestionDiff], metric: str, show: int | None) -> str:
    """The first ``show`` questions (None: all) as an aligned table; the answer and NM columns only
    where a run has answers. Empty for ``show == 0`` or no question."""
    listed = list(questions) if show is None else list(questions)[:show]
    if not listed:
        return ""
    records = [question_record(q) for q in listed]
    answers = any(r["answer_a"] is not None or r["answer_b"] is not None for r in records)
    label = metric_label(metric)
    head = ["effect", "subset", "id", "question", "gold"]
    head += [*(["answer A", "NM A", "answer B", "NM B"] if answers else []), "gold rank A", "gold rank B", f"{label} A", f"{label} B"]
    body = []
    for r in records:
        cells = [r["effect"], r["subset"], r["id"], shorten(r["question"], QUESTION_WIDTH), shorten(_cell(r["gold"]), 16)]
        if answers:
            cells += [shorten(_cell(r["answer_a"]), 16), _cell(r["nm_a"]), shorten(_cell(r["answer_b"]), 16), _cell(r["nm_b"])]
        cells += [_rank(r["gold_rank_a"]), _rank(r["gold_rank_b"]), tabular.value(r["a"]), tabular.value(r["b"])]
        body.append(cells)
    text = tabular.aligned(head, body, left=5)
    more = len(questions) - len(listed)
    return text + (f"\n… {more} more (--show all, or --out FILE.csv|jsonl for every one)" if more else "")


def check_out(path: Path | None) -> None:
    """``--out`` names a .csv or .jsonl file (checked before any work)."""
    if path is not None and path.suffix.lower() not in OUT_SUFFIXES:
        raise ListingError(f"--out {path}: give a file name ending in .csv or .jsonl (every differing question is written)")
    if path is not None and path.is_dir():
        raise ListingError(f"--out {path}: a directory; give a file name ending in .csv or .jsonl")


def write_records(path: Path, records: Sequence[Mapping[str, Any]], first: Sequence[str] = ()) -> None:
    """``records`` (their keys: ``first``, then a question record's) as CSV (one header row, the
    csv module) or JSON lines, by ``path``'s suffix; written whole or not at all (an existing file
    is replaced)."""
    check_out(path)
    if path.suffix.lower() == ".jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        atomic_write_text(path, text)
        return
    columns = [*first, *question_record_columns()]
    tabular.write_csv(path, columns, ([r.get(c) for c in columns] for r in records))


def question_record_columns() -> list[str]:
    """The columns of a question record (a CSV with no differing question still has its header)."""
    return list(question_record(QuestionDiff("", "", None, None, None, True, True)))
