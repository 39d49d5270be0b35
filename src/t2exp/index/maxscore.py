"""Exact top-k BM25 without scoring every posting: MaxScore-style pruning over bm25s's precomputed
impacts (bm25s itself sums every posting of a query's terms, a cost that grows with the corpus).

1. postings are also kept sorted by impact; a term's upper bound is its first impact (times its count);
2. ``theta``: the k-th best full score among the first k documents of each term (a lower bound);
3. the terms with the smallest bounds that sum below ``theta`` are non-essential: only looked up;
4. of each essential term's impact-sorted posting, the prefix with
   ``impact >= theta - (sum of bounds - own bound)`` gives the candidates;
5. candidates are scored in full by binary search in the document-sorted postings; best k returned
   (ties by document order).

Exact: a document reaching the true k-th score holds an essential term and lies in each prefix.
"""

from __future__ import annotations

import numpy as np

_SLACK = 1e-6  # relative: float32 impacts summed in another order may differ in the last bits


class ImpactIndex:
    """Top-k queries over a term-major sparse score matrix (``data``/``indices``/``indptr`` of bm25s)."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int) -> None:
        self.data, self.indices = np.asarray(data), np.asarray(indices)
        self.indptr, self.num_docs = np.asarray(indptr, dtype=np.int64), int(num_docs)
        lengths = np.diff(self.indptr)
        term_of = np.repeat(np.arange(len(lengths)), lengths)
        order = np.lexsort((-self.data.astype(np.float64), term_of))  # per term, best impact first
        self.impact_docs = self.indices[order]
        self.impacts = self.data[order].astype(np.float64)
        self.bound = np.zeros(len(lengths))  # a term's best impact: its upper bound per occurrence in a query
        self.bound[lengths > 0] = self.impacts[self.indptr[:-1][lengths > 0]]

    def _full_scores(self, docs: np.ndarray, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        out = np.zeros(len(docs), dtype=np.float64)
        for t, w in zip(terms, weights, strict=True):
            lo, hi = self.indptr[t], self.indptr[t + 1]
            posting = self.indices[lo:hi]
            pos = np.searchsorted(posting, docs)
            inside = pos < len(posting)
            hit = np.zeros(len(docs), dtype=bool)
            hit[inside] = posting[pos[inside]] == docs[inside]
            out[hit] += w * self.data[lo + pos[hit]]
        return out

    def topk(self, token_ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Document indices and scores of the best ``k`` documents with a positive score, best first."""
        terms, weights = np.unique(np.asarray(token_ids, dtype=np.int64), return_counts=True)
        terms, weights = terms[terms < len(self.bound)], weights[terms < len(self.bound)]  # ids past the matrix: no postings
        keep = self.bound[terms] > 0
        terms, weights = terms[keep], weights[keep].astype(np.float64)
        if len(terms) == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        bounds = self.bound[terms] * weights
        total = float(bounds.sum())
        starts = self.indptr[terms]
        seed = np.unique(
            np.concatenate([self.impact_docs[s : s + min(k, self.indptr[t + 1] - s)] for s, t in zip(starts, terms, strict=True)])
        )
        seed_scores = self._full_scores(seed, terms, weights)
        theta = float(np.partition(seed_scores, len(seed) - k)[len(seed) - k]) if len(seed) >= k else 0.0
        theta -= _SLACK * total
        by_bound = np.argsort(bounds, kind="stable")
        essential = by_bound[np.cumsum(bounds[by_bound]) >= theta]
        parts = [seed]
        for i in essential:
            t, w = terms[i], weights[i]
            lo, hi = self.indptr[t], self.indptr[t + 1]
            need = (theta - (total - bounds[i])) / w
            # impacts are descending in [lo, hi): the prefix whose impact is at least `need`
            n = hi - lo if need <= 0 else int(np.searchsorted(-self.impacts[lo:hi], -need, side="right"))
            parts.append(self.impact_docs[lo : lo + n])
        cand = np.unique(np.concatenate(parts))
        scores = self._full_scores(cand, terms, weights)
        positive = scores > 0
        cand, scores = cand[positive], scores[positive]
        best = np.lexsort((cand, -scores))[:k]
        return cand[best].astype(np.int64), scores[best]
