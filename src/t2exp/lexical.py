"""BM25 with the paper's tokenisation (lower-cased whitespace split), two implementations:

- ``bm25s`` (default, fast): bm25s's Lucene-style IDF, always positive;
- ``rank_bm25``: ``rank_bm25.BM25Okapi`` with its defaults (k1 1.5, b 0.75, negative IDF floored at
  0.25 x the mean IDF) — what the T²-RAGBench authors' code uses. On identical tokens the two
  differ by several MRR@3 points on FinQA (benchmarks/README.md).

Both return, per query, the top-k ``(context_id, score)`` with a positive score, best first.
"""

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


class RankBM25Index:
    name = "rank_bm25"

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = list(ids)
        self.retriever = BM25Okapi([paper_tokenize(t) for t in texts], k1=k1, b=b)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        out = []
        for q in queries:
            scores = np.asarray(self.retriever.get_scores(paper_tokenize(q)), dtype=float)
            top = np.argsort(-scores, kind="stable")[: min(k, len(self.ids))]
            out.append([(self.ids[int(i)], float(scores[i])) for i in top if scores[i] > 0])
        return out


LEXICAL_INDEXES: dict[str, type[BM25sIndex] | type[RankBM25Index]] = {"bm25s": BM25sIndex, "rank_bm25": RankBM25Index}
