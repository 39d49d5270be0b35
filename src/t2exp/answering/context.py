"""What the generator reads of each document handed to it (``context.*``; docs/config/context.md).

- ``mode=full``: the whole document, as indexed; ``focused``: its tables, whole, plus the
  ``context.sentences`` prose sentences sharing the most IDF-weighted terms with the question
  (words and numbers, ``1,234.5`` → ``1234.5``), in document order.
  Tables are the lines holding a Markdown row; FinQA glues its table into the prose, so the text
  before a row's first ``|`` stays with the table as its caption when the row opens it, and the text
  after its last ``|`` goes back to the prose. Sentences end at ``.``/``!``/``?`` plus a space, or a line break.
- ``tables``: ``markdown`` or ``rows`` (:func:`t2exp.answering.table_text.with_rows`);
  ``documents``: how many of the k retrieved documents are read (null: all);
  ``header``: ``company_year`` opens each with its report (:func:`t2exp.index.documents.heading`), or ``none``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from t2exp.answering.table_text import row_parts, with_rows

MODES = ("full", "focused")
HEADERS = ("none", "company_year")
_TOKEN = re.compile(r"[a-z]+|\d+(?:[.,]\d+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class ContextShaper:
    """The rule for one run: ``ContextShaper("focused", 3).of(question, document)``."""

    # the defaults of context.* in the schema (ContextConfig); tests/config/test_defaults.py holds them equal
    mode: str = "focused"
    sentences: int = 3
    tables: str = "markdown"
    header: str = "none"
    documents: int | None = 1

    def of(self, question: str, document: str, heading: str = "") -> str:
        text = document if self.mode == "full" else focus(question, document, self.sentences)
        text = with_rows(text) if self.tables == "rows" else text
        return f"{heading}\n{text}" if heading and self.header != "none" else text

    def all(self, question: str, documents: Sequence[str], headings: Sequence[str] = ()) -> list[str]:
        """The evidence of the first ``self.documents`` of ``documents`` (best first; all when
        None); ``headings[i]`` (:func:`t2exp.index.documents.heading`) opens document ``i`` when
        ``header`` asks for it."""
        heads = list(headings) or [""] * len(documents)
        pairs = list(zip(documents, heads, strict=True))[: self.documents]
        return [self.of(question, d, h) for d, h in pairs]


def terms(text: str) -> list[str]:
    """Lower-case words and numbers, thousands separators dropped (``$1,234.5`` → ``1234.5``)."""
    out = []
    for t in _TOKEN.findall(text.lower()):
        if t[0].isdigit():
            t = t.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", t) else t
        out.append(t)
    return out


def split(document: str) -> list[tuple[str, str]]:
    """The document as ``(kind, text)`` pieces in order: ``table`` (one Markdown row, its caption
    attached when it opens a table) or ``prose`` (one sentence)."""
    pieces: list[tuple[str, str]] = []

    def prose(text: str) -> None:
        text = text.strip().strip("_").strip()
        for s in _SENTENCE_END.split(text):
            if s.strip():
                pieces.append(("prose", s.strip()))

    for line in document.splitlines():
        parts = row_parts(line)
        if parts is None:
            prose(line)
            continue
        head, row, tail = parts
        opens = not pieces or pieces[-1][0] != "table"
        caption = head.strip().strip("_").strip()
        if caption and not opens:
            prose(caption)
            caption = ""
        pieces.append(("table", f"{caption}\n{row}" if caption else row))
        prose(tail)
    return pieces


def focus(question: str, document: str, sentences: int) -> str:
    """Tables whole + the ``sentences`` best-matching prose sentences, in document order."""
    pieces = split(document)
    prose_ids = [i for i, (kind, _) in enumerate(pieces) if kind == "prose"]
    if len(prose_ids) <= sentences:
        return document
    docs = {i: set(terms(pieces[i][1])) for i in prose_ids}
    df = Counter(t for ts in docs.values() for t in ts)
    n = len(prose_ids)
    wanted = set(terms(question))

    def score(i: int) -> float:  # fsum: exact whatever order the set gives (string hashes differ per process)
        return math.fsum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted & docs[i])

    keep = set(sorted(prose_ids, key=lambda i: (-score(i), i))[:sentences])
    return "\n".join(text for i, (kind, text) in enumerate(pieces) if kind == "table" or i in keep)
