"""Hybrid: BM25 and dense rankings fused (``t2exp.fusion``).

``lexical=store`` uses the store's native BM25 (and its hybrid query); ``lexical=bm25s`` /
``rank_bm25`` use an in-memory BM25 index (``t2exp.lexical``; default the paper's tokenisation,
lower-cased whitespace split) and ``lexical=fielded`` a field-aware, passage-level one
(``t2exp.fielded``), set by ``bm25`` (``rag_method.bm25.*``), fused with the store's dense ranking
by the same fusion function. Both candidate lists have ``max(k, candidate_depth)`` entries; with
``alpha=0`` (and an in-memory BM25) nothing is embedded, neither the corpus nor the query: the
lexical ranking is the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from t2exp.fusion import fuse
from t2exp.indexing import lexical_index
from t2exp.methods import Ranking, RetrievingMethod

LEXICAL = ("bm25s", "rank_bm25", "fielded", "store")


class Hybrid(RetrievingMethod):
    def __init__(self, name: str = "hybrid", alpha: float = 0.5, fusion: str = "relative_score", lexical: str = "bm25s",
                 candidate_depth: int = 50, bm25: Mapping[str, Any] | None = None) -> None:
        super().__init__(name)
        self.alpha = float(alpha)
        self.fusion = fusion
        self.lexical = lexical
        self.candidate_depth = candidate_depth
        self.bm25 = _plain(bm25 or {})

    @property
    def lexical_only(self) -> bool:
        return self.alpha == 0.0 and self.lexical != "store"

    def prepare(self, subset, services):  # noqa: ANN001, ANN201
        if self.lexical_only:  # nothing to embed or store
            self.query = services.query
            return lexical_index(subset, services.variant)
        return super().prepare(subset, services)

    def retrieve(self, questions, index, k):  # noqa: ANN001, ANN201
        texts = self.queries(questions)
        depth = max(k, self.candidate_depth)
        if self.lexical_only:
            return [Ranking(s[:k]) for s in index.lexical(self.lexical, self.bm25).search(texts, depth)]
        qv = index.embedder.embed_queries(texts)
        if self.lexical == "store":
            return index.store.hybrid(texts, qv, k, self.alpha, self.fusion)
        dense = index.store.dense(qv, depth)
        lexical = index.lexical(self.lexical, self.bm25).search(texts, depth)
        return [Ranking(fuse(d, s, k, self.alpha, self.fusion), dense=d) for d, s in zip(dense, lexical, strict=True)]


def _plain(node: Any) -> Any:
    """A config node (DictConfig from instantiate) as plain dicts and lists."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
