"""Hybrid: BM25 and dense rankings fused (``t2exp.index.fusion``), each list ``max(k, candidate_depth)`` long.

``lexical=store``: the store's BM25 (and hybrid query); ``bm25s`` / ``rank_bm25``: an in-memory index
(``t2exp.index.lexical``); ``fielded``: ``t2exp.index.fielded`` (``rag_method.bm25.*``). With
``alpha=0`` and an in-memory BM25 nothing is embedded. ``fusion=paper``
(``t2exp.index.fusion.fuse_paper``): the dense top-k and every document's BM25 score, returned to the
retrieval depth (its first k are the authors' top-k).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from t2exp.index.build import lexical_index
from t2exp.index.fusion import WHOLE_CORPUS, fuse, fuse_paper
from t2exp.methods import Ranking, RetrievingMethod

LEXICAL = ("bm25s", "rank_bm25", "fielded", "store")
WHOLE_CORPUS_LEXICAL = ("rank_bm25", "bm25s")  # in-memory indexes that score every document (rank_all)


class Hybrid(RetrievingMethod):
    def __init__(
        self,
        name: str = "hybrid",
        alpha: float = 0.5,
        fusion: str = "relative_score",
        lexical: str = "bm25s",
        candidate_depth: int = 50,
        bm25: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name)
        self.alpha = float(alpha)
        self.fusion = fusion
        self.lexical = lexical
        self.candidate_depth = candidate_depth
        self.bm25 = _plain(bm25 or {})
        self.k: int | None = None  # the run's k (Services.k), set by prepare

    @property
    def lexical_only(self) -> bool:
        return self.alpha == 0.0 and self.lexical != "store"

    def prepare(self, subset, services):
        self.k = services.k
        if self.lexical_only:  # nothing to embed or store
            self.query = services.query
            return lexical_index(subset, services.variant)
        return super().prepare(subset, services)

    def retrieve(self, questions, index, k):
        texts = self.queries(questions)
        depth = max(k, self.candidate_depth)
        if self.lexical_only:
            return [Ranking(s[:k]) for s in index.lexical(self.lexical, self.bm25).search(texts, depth)]
        qv = index.embedder.embed_queries(texts)
        if self.lexical == "store":
            return index.store.hybrid(texts, qv, k, self.alpha, self.fusion)
        if self.fusion in WHOLE_CORPUS:  # the authors' hybrid: dense top-k, every document's BM25
            dense = index.store.dense(qv, self.k or k)
            everything = index.lexical(self.lexical, self.bm25).rank_all(texts)
            return [Ranking(fuse_paper(d, s, k, self.alpha), dense=d) for d, s in zip(dense, everything, strict=True)]
        dense = index.store.dense(qv, depth)
        lexical = index.lexical(self.lexical, self.bm25).search(texts, depth)
        return [Ranking(fuse(d, s, k, self.alpha, self.fusion), dense=d) for d, s in zip(dense, lexical, strict=True)]


def _plain(node: Any) -> Any:
    """A config node (DictConfig from instantiate) as plain dicts and lists."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
