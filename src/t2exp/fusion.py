"""Fusing a dense and a lexical ranking into one.

``relative_score``: per list, scores are min-max normalised to [0, 1] over the retrieved
candidates, then combined as ``alpha * dense + (1 - alpha) * bm25`` (a document missing from a
list contributes 0 there). This is Weaviate's relativeScoreFusion, so ``alpha`` means the same in
both stores: 1 = pure dense, 0 = pure BM25.
``rrf``: reciprocal rank fusion, ``alpha / (rrf_k + rank_dense) + (1 - alpha) / (rrf_k + rank_bm25)``
(ranks from 1; Weaviate's rankedFusion uses the same weighting, rrf_k = 60).
"""

from __future__ import annotations

from t2exp.errors import ConfigError

FUSIONS = ("relative_score", "rrf")


def _minmax(hits: list[tuple[str, float]]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return {cid: 1.0 for cid, _ in hits}
    return {cid: (s - lo) / (hi - lo) for cid, s in hits}


def fuse(
    dense: list[tuple[str, float]],
    lexical: list[tuple[str, float]],
    k: int,
    alpha: float,
    fusion: str = "relative_score",
    rrf_k: int = 60,
) -> list[tuple[str, float]]:
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"rag_method.alpha={alpha}: must be in [0, 1] (1 = pure dense, 0 = pure BM25)")
    if alpha == 1.0:
        return dense[:k]
    if alpha == 0.0:
        return lexical[:k]
    combined: dict[str, float] = {}
    if fusion == "relative_score":
        for cid, s in _minmax(dense).items():
            combined[cid] = combined.get(cid, 0.0) + alpha * s
        for cid, s in _minmax(lexical).items():
            combined[cid] = combined.get(cid, 0.0) + (1 - alpha) * s
    elif fusion == "rrf":
        for rank, (cid, _) in enumerate(dense, start=1):
            combined[cid] = combined.get(cid, 0.0) + alpha / (rrf_k + rank)
        for rank, (cid, _) in enumerate(lexical, start=1):
            combined[cid] = combined.get(cid, 0.0) + (1 - alpha) / (rrf_k + rank)
    else:
        raise ConfigError(f"rag_method.fusion={fusion!r}: allowed values are {', '.join(FUSIONS)}")
    # ties broken by dense order, then lexical order, for determinism
    order = {cid: i for i, (cid, _) in enumerate(dense + lexical)}
    ranked = sorted(combined.items(), key=lambda kv: (-kv[1], order.get(kv[0], 0)))
    return ranked[:k]
