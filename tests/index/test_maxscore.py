"""The pruned top-k equals the exhaustive one (bm25s's own sum over every posting)."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from t2exp.index.lexical import BM25sIndex
from t2exp.index.maxscore import ImpactIndex


def _zipf_corpus(n_docs: int, vocab: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    weights = [1.0 / (r + 1) for r in range(vocab)]
    words = [f"w{r}" for r in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(3, 60)) for _ in range(n_docs)]


def _exhaustive(retriever: bm25s.BM25, ids: list[int], k: int) -> list[tuple[int, float]]:
    """Every posting of every query term added up, in the same term order and precision as the
    pruned path (so ties are ties in both)."""
    s = retriever.scores
    scores = np.zeros(s["num_docs"])
    terms, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
    for t, w in zip(terms, counts.astype(np.float64), strict=True):
        lo, hi = s["indptr"][t], s["indptr"][t + 1]
        scores[s["indices"][lo:hi]] += w * s["data"][lo:hi]
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [(int(d), float(scores[d])) for d in order if scores[d] > 0]


@pytest.mark.parametrize("seed", range(6))
def test_pruned_topk_equals_the_exhaustive_sum(seed: int) -> None:
    corpus = _zipf_corpus(1500, 400, seed)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(corpus, show_progress=False)
    s = retriever.scores
    index = ImpactIndex(s["data"], s["indices"], s["indptr"], s["num_docs"])
    rng = random.Random(100 + seed)
    vocab = sorted(t for t in retriever.vocab_dict if t)
    for k in (1, 5, 50, 2000):
        for _ in range(40):
            # common and rare words, some repeated (bm25s counts a repeated query term each time)
            query = rng.choices(vocab, k=rng.randint(1, 25)) + rng.choices(["w0", "w1", "w2"], k=rng.randint(0, 3))
            ids = retriever.get_tokens_ids(query)
            docs, scores = index.topk(np.asarray(ids), k)
            want = _exhaustive(retriever, ids, k)
            assert [(int(d), float(v)) for d, v in zip(docs, scores, strict=True)] == want, (k, query)


def test_pruning_reads_only_part_of_the_postings_of_common_words() -> None:
    corpus = _zipf_corpus(20000, 2000, 7)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(corpus, show_progress=False)
    s = retriever.scores
    index = ImpactIndex(s["data"], s["indices"], s["indptr"], s["num_docs"])
    seen: list[int] = []
    full = index._full_scores

    def counting(docs: np.ndarray, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        seen.append(len(docs))
        return full(docs, terms, weights)

    index._full_scores = counting  # type: ignore[method-assign]
    ids = retriever.get_tokens_ids(["w0", "w1", "w3", "w1500", "w1700"])
    postings = sum(int(s["indptr"][t + 1] - s["indptr"][t]) for t in ids)
    docs, _ = index.topk(np.asarray(ids), 10)
    assert len(docs) == 10
    assert sum(seen) < postings / 5, (seen, postings)


def test_empty_and_unknown_queries_return_nothing() -> None:
    index = BM25sIndex(["a", "b"], ["revenue grew", "net income fell"], tokenizer="alnum", pruned=True)
    assert index.search(["", "zzz unknown"], 3) == [[], []]
    assert [d for d, _ in index.search(["revenue"], 3)[0]] == ["a"]


def test_bm25s_index_pruned_and_exhaustive_agree_on_scores(tmp_path) -> None:
    corpus = [" ".join(doc) for doc in _zipf_corpus(800, 300, 3)]
    ids = [f"d{i}" for i in range(len(corpus))]
    plain = BM25sIndex(ids, corpus, k1=1.2, b=0.75, tokenizer="alnum", scale=2.2)
    pruned = BM25sIndex(ids, corpus, k1=1.2, b=0.75, tokenizer="alnum", scale=2.2, pruned=True)
    pruned.save(tmp_path)
    loaded = BM25sIndex.load(tmp_path)
    queries = [" ".join(random.Random(i).choices(corpus[i].split(), k=8)) for i in range(60)]
    for a, b, c in zip(plain.search(queries, 10), pruned.search(queries, 10), loaded.search(queries, 10), strict=True):
        assert np.allclose([s for _, s in a], [s for _, s in b], rtol=1e-5)
        assert b == c
