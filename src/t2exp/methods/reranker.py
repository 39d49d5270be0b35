"""Reranker: first-stage candidates (from ``base`` or ``hybrid``) rescored by a reranker.

``candidates`` defaults to the T²-RAGBench authors' rule ``max(int(3k), k + 2)`` (their
``rerank_ratio`` 3), k the run's k (``Services.k``): every candidate is rescored and the reranked
list is returned to the retrieval depth, so its first k are what a top-k reranker returns and
R@5 reads the same order further down (undefined beyond the candidates). The reranker scores the
query string the first stage searched with. Full documents are passed to the reranker unless
``reranker.max_chars`` says otherwise; how many were truncated is counted and logged.
"""

from __future__ import annotations

from typing import Any

from t2exp.methods import Ranking, RetrievingMethod
from t2exp.methods.base import Base
from t2exp.methods.hybrid import Hybrid

FIRST_STAGES = ("base", "hybrid")
RERANK_RATIO = 3  # candidates per retrieved document (the authors' rerank_ratio)


def default_candidates(k: int) -> int:
    """The authors' first-stage size for top-k reranking: ``max(int(k * 3), k + 2)``."""
    return max(int(k * RERANK_RATIO), k + 2)


class Rerank(RetrievingMethod):
    needs_reranker = True

    def __init__(self, reranker, name: str = "reranker", first_stage: str = "hybrid", candidates: int | None = None, **hybrid: Any) -> None:
        """``hybrid``: the first stage's settings (:class:`~t2exp.methods.hybrid.Hybrid`'s), unread by ``base``."""
        super().__init__(name)
        self.first: RetrievingMethod = Base("base") if first_stage == "base" else Hybrid(**hybrid)
        self.candidates = candidates
        self.reranker = reranker
        self.k: int | None = None  # the run's k (Services.k), set by prepare

    def prepare(self, subset, services):
        if hasattr(self.reranker, "bind"):  # embedding-based rerankers use the run's cached embedder
            self.reranker.bind(services.embedder)
        if hasattr(self.reranker, "bind_generator"):  # an LLM judge uses the run's cached generator
            self.reranker.bind_generator(services.generator, services.prompts)
        self.k = services.k
        index = super().prepare(subset, services)
        self.first.query = self.query  # the first stage sees the same query string
        return index

    def retrieve(self, questions, index, k):
        n = self.candidates or default_candidates(self.k or k)  # candidates >= k is a config rule (t2exp.config.rules)
        first = self.first.retrieve(questions, index, n)
        out = []
        for query, hits in zip(self.queries(questions), first, strict=True):
            ids = [cid for cid, _ in hits]
            scores = self.reranker.score(query, [index.docs[cid].text for cid in ids])
            ranked = sorted(zip(ids, scores, strict=False), key=lambda t: -t[1])
            out.append(Ranking([(cid, float(s)) for cid, s in ranked][:k], dense=Ranking.of(hits).dense, depth=len(ids)))
        return out

    def stats(self) -> dict[str, float]:
        return {f"reranker_{k}": float(v) for k, v in self.reranker.stats().items()}
