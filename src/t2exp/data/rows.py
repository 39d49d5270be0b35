"""Rows of T²-RAGBench files (the Hugging Face schema) checked and turned into records: every
problem is one line naming the file, the row and the column."""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from t2exp.data.records import Document, Question, Subset
from t2exp.errors import DataError
from t2exp.text.numbers import parse_gold

log = logging.getLogger("t2exp.data.loader")

REQUIRED_COLUMNS = ("id", "context_id", "question", "program_answer", "context")
METADATA_COLUMNS = ("company_name", "report_year", "company_sector", "file_name", "company_symbol", "page_number")
FILE_RE = re.compile(r"^(?P<subset>FinQA|ConvFinQA|VQAonBD|TAT-DQA)_(?P<split>[^.]+)\.(?P<ext>parquet|jsonl)$")


def _clean(value: Any) -> str:
    """A cell as text; missing values (None, NaN, pd.NA, NaT) are empty."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if pd.api.types.is_scalar(value) and not isinstance(value, str) and pd.isna(value):
        return ""
    return str(value)


def _missing_columns_message(source: str, missing: list[str], columns: Sequence[Any]) -> str:
    present = [str(c) for c in columns]
    hints = []
    for m in missing:
        close = difflib.get_close_matches(m, [c for c in present if c not in REQUIRED_COLUMNS], n=1, cutoff=0.6)
        if close:
            hints.append(f"{close[0]!r} for {m!r}")
    hint = f"; renamed? found {', '.join(hints)}" if hints else ""
    return f"{source}: missing column(s) {', '.join(missing)} (row 0){hint}; T²-RAGBench files need {', '.join(REQUIRED_COLUMNS)}"


def _split_from_name(f: Path) -> str:
    m = FILE_RE.match(f.name)
    return m.group("split") if m else "unknown"


def rows_to_subset(
    name: str,
    frames: Iterable[tuple[str, pd.DataFrame]],
    *,
    question_splits: Sequence[str] | None = None,
    corpus_splits: Sequence[str] | None = None,
    skip_empty_questions: bool = True,
) -> Subset:
    """Validate rows of one subset and turn them into records. ``frames`` are (source, frame).

    The corpus is the unique contexts of the rows of ``corpus_splits`` (``None``: every loaded
    split; the T²-RAGBench authors' code indexes the contexts of the rows it is given); a question
    whose gold context is not in it is an error, since no retriever could find it."""
    rows = _Rows(name, question_splits, corpus_splits, skip_empty_questions)
    for source, df in frames:
        rows.add_frame(source, df)
    return rows.subset()


class _Rows:
    """The records of one subset, built as its frames' rows are checked."""

    def __init__(
        self, name: str, question_splits: Sequence[str] | None, corpus_splits: Sequence[str] | None, skip_empty_questions: bool
    ) -> None:
        self.name, self.question_splits, self.corpus_splits = name, question_splits, corpus_splits
        self.skip_empty_questions = skip_empty_questions
        self.questions: list[Question] = []
        self.corpus: dict[str, Document] = {}
        self.context_source: dict[str, tuple[str, int]] = {}
        self.texts: dict[str, str] = {}
        self.seen_ids: dict[str, tuple[str, int]] = {}
        self.sources: list[str] = []
        self.stats = {"empty_questions_skipped": 0, "non_numeric_gold": 0, "rows": 0}

    def add_frame(self, source: str, df: pd.DataFrame) -> None:
        self.sources.append(source)
        if len(df) == 0:
            return  # no rows to check; an empty subset is reported by subset()
        missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
        if missing:
            raise DataError(_missing_columns_message(source, missing, list(df.columns)))
        default_split = _split_from_name(Path(source))
        for i, row in enumerate(df.to_dict(orient="records")):
            self.stats["rows"] += 1
            self._add_row(source, i, row, default_split)

    def _add_row(self, source: str, i: int, row: dict[str, Any], default_split: str) -> None:
        qid = self._unique_id(source, i, row)
        cid, text = self._context(source, i, row)
        meta = {c: _clean(row.get(c)) for c in METADATA_COLUMNS if _clean(row.get(c))}
        split = _clean(row.get("split")) or default_split
        if cid not in self.corpus and (not self.corpus_splits or split in self.corpus_splits):
            self.corpus[cid] = Document(context_id=cid, subset=self.name, text=text, metadata=meta)
        if self.question_splits and split not in self.question_splits:
            return
        question = _clean(row.get("question")).strip()
        if not question:
            if not self.skip_empty_questions:
                raise DataError(f"{source}: row {i}: column 'question' is empty")
            self.stats["empty_questions_skipped"] += 1
            log.warning("%s: row %d: column 'question' is empty; skipped", source, i)
            return
        gold_raw = _clean(row.get("program_answer"))
        gold = parse_gold(gold_raw)
        self.stats["non_numeric_gold"] += gold is None
        self.questions.append(
            Question(
                id=qid,
                subset=self.name,
                split=split,
                context_id=cid,
                question=question,
                gold=gold,
                gold_raw=gold_raw,
                original_answer=_clean(row.get("original_answer")),
                metadata=meta,
            )
        )

    def _unique_id(self, source: str, i: int, row: dict[str, Any]) -> str:
        qid = _clean(row.get("id")).strip()
        if not qid:
            raise DataError(f"{source}: row {i}: column 'id' is empty; every question needs a unique id")
        if qid in self.seen_ids:
            s0, r0 = self.seen_ids[qid]
            raise DataError(f"{source}: row {i}: column 'id' value {qid!r} duplicates {s0} row {r0}")
        self.seen_ids[qid] = (source, i)
        return qid

    def _context(self, source: str, i: int, row: dict[str, Any]) -> tuple[str, str]:
        """The row's context id and text; one context id has one text across every file."""
        cid = _clean(row.get("context_id")).strip()
        if not cid:
            raise DataError(f"{source}: row {i}: column 'context_id' is empty")
        text = _clean(row.get("context"))
        if not text.strip():
            raise DataError(f"{source}: row {i}: column 'context' is empty for context_id {cid!r}")
        if cid in self.context_source:
            s0, r0 = self.context_source[cid]
            if self.texts[cid] != text:
                raise DataError(
                    f"{source}: row {i}: column 'context' for context_id {cid!r} differs from {s0} row {r0}; "
                    "one context_id must have one text"
                )
        else:
            self.context_source[cid] = (source, i)
            self.texts[cid] = text
        return cid, text

    def subset(self) -> Subset:
        """The subset, once every frame is in: a non-empty corpus holding every question's gold context."""
        if not self.corpus:
            splits = f" of dataset.corpus_splits={list(self.corpus_splits)}" if self.corpus_splits else ""
            raise DataError(f"subset {self.name}: the corpus{splits} is empty (sources: {', '.join(self.sources) or 'none'})")
        orphans = [q for q in self.questions if q.context_id not in self.corpus]
        if orphans:
            q = orphans[0]
            raise DataError(
                f"dataset.corpus_splits={list(self.corpus_splits or [])} leaves out the gold context of {len(orphans)} {self.name} "
                f"question(s) (e.g. id {q.id!r}, split {q.split!r}); allowed: splits that hold them, or dataset.question_splits "
                "limited to the corpus's"
            )
        return Subset(name=self.name, questions=self.questions, corpus=list(self.corpus.values()), sources=self.sources, stats=self.stats)
