"""Fusing a dense and a lexical ranking into one (``alpha``: 1 = pure dense, 0 = pure BM25).

``relative_score``: per list, scores min-max normalised over the candidates, then
``alpha * dense + (1 - alpha) * bm25`` (0 for a missing document): Weaviate's relativeScoreFusion.
``rrf``: ``alpha / (rrf_k + rank_dense) + (1 - alpha) / (rrf_k + rank_bm25)``, ranks from 1
(Weaviate's rankedFusion counts from 0, so near-ties can order differently).
``paper``: the T²-RAGBench authors' ``HybridBM25RAG``: the dense top-k and **every document** in BM25
order (``fuse_paper``); a document scores ``alpha * (1 - pos / len(dense)) + (1 - alpha) * sparse``
(``pos`` 0-based, 0 outside the dense list), ``sparse`` its BM25 score over the best, or for a zero
BM25 score ``0.9 * min_positive * (1 - bm25_pos / n_docs)``.
``paper_rank``: the same formula over two cut lists of ``candidate_depth``, no zero-score fallback.
``alpha`` 1 / 0 return one list unchanged (raw scores) for all but ``paper``; ties keep the dense order.
``unit_scale`` maps any fusion's scores onto [0, 1], so ``metadata_hybrid``'s boosts mean the same
under every fusion and alpha. Values are checked by the config schema, not here.
"""

from __future__ import annotations

FUSIONS = ("relative_score", "rrf", "paper", "paper_rank")
# fusions that read the whole corpus's BM25 scores, zeros included (an in-memory BM25 index)
WHOLE_CORPUS = ("paper",)


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
    elif fusion == "paper_rank":
        for pos, (cid, _) in enumerate(dense):
            combined[cid] = combined.get(cid, 0.0) + alpha * (1.0 - pos / len(dense))
        best = lexical[0][1] if lexical else 0.0
        for cid, s in lexical:
            combined[cid] = combined.get(cid, 0.0) + (1 - alpha) * (s / best if best > 0 else 0.0)
    else:  # rrf
        for rank, (cid, _) in enumerate(dense, start=1):
            combined[cid] = combined.get(cid, 0.0) + alpha / (rrf_k + rank)
        for rank, (cid, _) in enumerate(lexical, start=1):
            combined[cid] = combined.get(cid, 0.0) + (1 - alpha) / (rrf_k + rank)
    # ties: the dense order first (a document's first position in dense + lexical)
    order: dict[str, int] = {}
    for i, (cid, _) in enumerate(dense + lexical):
        order.setdefault(cid, i)
    ranked = sorted(combined.items(), key=lambda kv: (-kv[1], order.get(kv[0], 0)))
    return ranked[:k]


def fuse_paper(
    dense: list[tuple[str, float]],
    everything: list[tuple[str, float]],
    depth: int,
    alpha: float = 0.5,
) -> list[tuple[str, float]]:
    """The authors' hybrid: ``dense`` is the dense retriever's list (their top-k), ``everything``
    every document of the corpus in BM25 order (best first) with its BM25 score, zeros included.
    Returns the top ``depth`` of the fused order; its first k are the authors' top-k. Ties (equal
    fused scores) keep the dense order, then the BM25 order."""
    n = len(everything)
    best = max((s for _, s in everything), default=0.0)
    normalised = {cid: s / best for cid, s in everything if best > 0 and s > 0}
    ceiling = 0.9 * min(normalised.values(), default=0.1)
    position = {cid: p for p, (cid, _) in enumerate(dense)}
    combined: dict[str, float] = {}
    for pos, (cid, _) in enumerate(everything):
        sparse = normalised.get(cid, 0.0) or ceiling * (1.0 - pos / max(n, 1))
        combined[cid] = (1 - alpha) * sparse
    for cid, pos in position.items():
        combined[cid] = combined.get(cid, 0.0) + alpha * (1.0 - pos / len(dense))
    order: dict[str, int] = {}
    for i, (cid, _) in enumerate(dense + everything):
        order.setdefault(cid, i)
    ranked = sorted(combined.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return ranked[:depth]


def unit_scale(hits: list[tuple[str, float]], fusion: str, alpha: float, rrf_k: int = 60) -> list[tuple[str, float]]:
    """Fused scores of ``fuse(..., alpha, fusion)`` on [0, 1], order unchanged: relative-score
    fusion already is (its maximum, 1, is a document first in both lists); RRF is divided by its
    maximum ``1 / (rrf_k + 1)``; a single list (alpha 0 or 1) is min-max normalised; ``paper_rank``
    is in [0, 1] already."""
    if alpha in (0.0, 1.0):
        scaled = _minmax(hits)
        return [(cid, scaled[cid]) for cid, _ in hits]
    if fusion == "rrf":
        return [(cid, s * (rrf_k + 1)) for cid, s in hits]
    return list(hits)
