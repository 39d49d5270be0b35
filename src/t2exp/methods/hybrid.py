"""Hybrid: BM25 and dense rankings fused (``t2exp.fusion``).

``lexical=store`` uses the store's native BM25 (and its hybrid query); ``lexical=bm25s`` /
``rank_bm25`` use an in-memory BM25 index with the paper's tokenisation (lower-cased whitespace
split, ``t2exp.lexical``) fused with the store's dense ranking by the same fusion function. Both
candidate lists have ``max(k, candidate_depth)`` entries.
"""

from __future__ import annotations

from t2exp.fusion import fuse
from t2exp.methods import Ranking, RetrievingMethod

LEXICAL = ("bm25s", "rank_bm25", "store")


class Hybrid(RetrievingMethod):
    def __init__(self, name: str = "hybrid", alpha: float = 0.5, fusion: str = "relative_score", lexical: str = "bm25s",
                 candidate_depth: int = 50) -> None:
        super().__init__(name)
        self.alpha = float(alpha)
        self.fusion = fusion
        self.lexical = lexical
        self.candidate_depth = candidate_depth

    def retrieve(self, questions, index, k):  # noqa: ANN001, ANN201
        texts = self.queries(questions)
        qv = index.embedder.embed_queries(texts)
        if self.lexical == "store":
            return index.store.hybrid(texts, qv, k, self.alpha, self.fusion)
        depth = max(k, self.candidate_depth)
        dense = index.store.dense(qv, depth)
        lexical = index.lexical(self.lexical).search(texts, depth)
        return [Ranking(fuse(d, s, k, self.alpha, self.fusion), dense=d) for d, s in zip(dense, lexical, strict=True)]
