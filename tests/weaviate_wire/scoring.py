"""Exact scoring for the Weaviate stand-in: tokenisation, BM25F, vector distances, hybrid fusion.

Every function here is a plain computation over numpy arrays and Python lists (no index, no
approximation); ``tests/weaviate_wire/__init__.py`` names the Weaviate documents each one follows.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np


def tokenize(text: str, tokenization: str) -> list[str]:
    """Weaviate's tokenisations of a text property (and of a query for that property).

    word: split on every non-alphanumeric character, lower-cased; lowercase: split on whitespace,
    lower-cased; whitespace: split on whitespace; field: the whole trimmed value, one token.
    """
    if tokenization == "word":
        return re.findall(r"[^\W_]+", text.lower())  # runs of letters and digits (str.isalnum)
    if tokenization == "lowercase":
        return text.lower().split()
    if tokenization == "whitespace":
        return text.split()
    if tokenization == "field":
        stripped = text.strip()
        return [stripped] if stripped else []
    raise ValueError(f"tokenization {tokenization!r} is not modelled by the stand-in")


def bm25f(
    query: str,
    docs: Sequence[dict[str, list[str]]],
    properties: Sequence[str],
    tokenizations: dict[str, str],
    k1: float,
    b: float,
) -> list[float]:
    """BM25F score of every document for ``query`` over ``properties`` (0 for a document that
    matches no query term; the caller drops those).

    ``docs[i][prop]`` is document i's token list for ``prop``. Per query term (duplicates counted
    once, their count multiplying the term's IDF; no stop words: the stand-in models preset "none"):
    ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` with N the number of objects and n the number
    containing the term in any searched property; the term frequency and the length are summed over
    the searched properties; ``tf = f / (f + k1 * (1 - b + b * len / avg_len))``, ``avg_len`` the mean
    over the searched properties of each one's mean token count; score = sum of ``tf * idf``.
    """
    n_docs = len(docs)
    if n_docs == 0 or not properties:
        return []
    means = [float(np.mean([len(d.get(p, [])) for d in docs])) for p in properties]
    avg_len = sum(means) / len(means)
    scores = [0.0] * n_docs
    by_tokenization: dict[str, list[str]] = {}
    for p in properties:
        by_tokenization.setdefault(tokenizations[p], []).append(p)
    for tokenization, props in by_tokenization.items():
        terms = Counter(tokenize(query, tokenization))
        counts = [[Counter(d.get(p, [])) for p in props] for d in docs]
        for term, dup in terms.items():
            freq = [sum(c[term] for c in doc_counts) for doc_counts in counts]
            matching = [i for i, f in enumerate(freq) if f > 0]
            if not matching:
                continue
            n = len(matching)
            idf = math.log(1.0 + (n_docs - n + 0.5) / (n + 0.5)) * dup
            for i in matching:
                length = sum(len(docs[i].get(p, [])) for p in props)
                f = float(freq[i])
                scores[i] += f / (f + k1 * (1.0 - b + b * length / avg_len)) * idf
    return scores


def distances(vectors: np.ndarray, query: np.ndarray, metric: str) -> np.ndarray:
    """Weaviate's distance of each row of ``vectors`` to ``query`` (smaller is closer).

    cosine: 1 - cosine similarity (0 .. 2); dot: the negative dot product; l2-squared: the
    squared Euclidean distance; manhattan: the L1 distance.
    """
    v = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if metric == "cosine":
        norms = np.linalg.norm(v, axis=1) * np.linalg.norm(q)
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = np.where(norms > 0, v @ q / np.where(norms > 0, norms, 1.0), 0.0)
        return 1.0 - sim
    if metric == "dot":
        return -(v @ q)
    if metric == "l2-squared":
        return ((v - q) ** 2).sum(axis=1)
    if metric == "manhattan":
        return np.abs(v - q).sum(axis=1)
    raise ValueError(f"distance {metric!r} is not modelled by the stand-in")


Scored = list[tuple[int, float]]  # (object position, value), best first


def relative_score_fusion(sets: Sequence[tuple[float, Scored]]) -> Scored:
    """relativeScoreFusion: each result set's values min-max normalised to [0, 1] (all equal: 1),
    times its weight, summed per object; sorted by the sum, ties (within 1e-7) by the value the
    object had in the last set it appeared in. ``sets`` = (weight, results), keyword set first."""
    total: dict[int, float] = {}
    secondary: dict[int, float] = {}
    for weight, results in sets:
        if not results:
            continue
        values = [v for _, v in results]
        lo, hi = min(values), max(values)
        for pos, v in results:
            norm = 1.0 if hi == lo else (v - lo) / (hi - lo)
            total[pos] = total.get(pos, 0.0) + weight * norm
            secondary[pos] = v
    return _ranked(total, secondary, tie=1e-7)


def ranked_fusion(sets: Sequence[tuple[float, Scored]], offset: int = 60) -> Scored:
    """rankedFusion: weight / (rank + 60) summed per object, rank counted from 0 in each set."""
    total: dict[int, float] = {}
    secondary: dict[int, float] = {}
    for weight, results in sets:
        for rank, (pos, v) in enumerate(results):
            total[pos] = total.get(pos, 0.0) + weight / (rank + offset)
            secondary[pos] = v
    return _ranked(total, secondary, tie=0.0)


def _ranked(total: dict[int, float], secondary: dict[int, float], tie: float) -> Scored:
    # a stable sort on (score, secondary, position): Go's sort.Slice leaves exact ties unordered, the
    # stand-in breaks them by insertion order so that its answers are reproducible
    items = sorted(total, key=lambda p: (-total[p], -secondary[p], p))
    if tie > 0:  # scores within `tie` of each other count as equal: order those by the secondary value
        out: list[int] = []
        for p in items:
            i = len(out)
            while i > 0 and abs(total[out[i - 1]] - total[p]) < tie and secondary[out[i - 1]] < secondary[p]:
                i -= 1
            out.insert(i, p)
        items = out
    return [(p, total[p]) for p in items]
