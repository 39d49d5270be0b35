"""BM25 with the paper's tokenisation (lower-cased whitespace split) through ``bm25s``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import numpy as np

logging.getLogger("bm25s").setLevel(logging.WARNING)


def paper_tokenize(text: str) -> list[str]:
    return text.lower().split()


class BM25sIndex:
    name = "bm25s"

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.ids = list(ids)
        self.retriever = bm25s.BM25(k1=k1, b=b)
        self.retriever.index([paper_tokenize(t) for t in texts], show_progress=False)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        if not queries:
            return []
        k = min(k, len(self.ids))
        toks = [paper_tokenize(q) or ["\x00"] for q in queries]
        docs, scores = self.retriever.retrieve(toks, k=k, show_progress=False, n_threads=0)
        out = []
        for row_d, row_s in zip(np.asarray(docs), np.asarray(scores), strict=True):
            out.append([(self.ids[int(d)], float(s)) for d, s in zip(row_d, row_s, strict=True) if s > 0])
        return out
