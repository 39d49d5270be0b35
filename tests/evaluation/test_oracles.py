"""Our metrics, fusion and statistics against the field's own libraries (independent oracles).

- MRR@k and Recall@k against ``ir-measures`` (trec_eval via pytrec_eval, what the paper's authors
  used) per question, and against ``ranx`` for the means;
- reciprocal-rank and relative-score fusion against ``ranx.fuse``;
- the percentile bootstrap CI and the exact sign-flip permutation test against ``scipy.stats``.

The synthetic runs give every document a distinct score, so trec_eval's tie order (by doc id)
never decides a rank. ranx's metrics and fusion are numba functions compiled on first use (once per
venv, a large share of a fresh CI's test time for a few dozen synthetic queries); the tests run them as
the plain Python they are written in, the same code (``NUMBA_DISABLE_JIT=1``, tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from t2exp.evaluation.metrics import (
    aggregate,
    bootstrap_ci,
    question_metrics,
    recall_at,
    reciprocal_rank,
)
from t2exp.evaluation.stats import paired_bootstrap, permutation_test
from t2exp.index.fusion import fuse


def synthetic_run(seed: int, n_questions: int = 40, pool: int = 15, depth: int = 8):
    """``(qrels, run, ranked)``: one relevant context per question, ranked ids with scores."""
    rng = np.random.default_rng(seed)
    qrels, run, ranked = {}, {}, {}
    for i in range(n_questions):
        qid = f"q{i}"
        docs = [f"d{j}" for j in rng.permutation(pool)[:depth]]
        gold = f"d{rng.integers(pool)}"  # in the ranking (at any rank) or not retrieved at all
        scores = np.sort(rng.random(depth))[::-1] + np.arange(depth)[::-1]  # strictly decreasing
        qrels[qid] = {gold: 1}
        run[qid] = {d: float(s) for d, s in zip(docs, scores, strict=True)}
        ranked[qid] = (docs, gold)
    return qrels, run, ranked


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_mrr_and_recall_equal_ir_measures_per_question(seed, k):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run, ranked = synthetic_run(seed)
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc([ir_measures.RR @ k, ir_measures.R @ k], qrels, run)}
    hits = 0
    for qid, (docs, gold) in ranked.items():
        assert reciprocal_rank(docs, gold, k) == pytest.approx(theirs[(qid, f"RR@{k}")], abs=1e-12), qid
        assert recall_at(docs, gold, k) == theirs[(qid, f"R@{k}")], qid
        hits += gold in docs[:k]
    assert 0 < hits < len(ranked)  # the runs have hits and misses at every cut-off


@pytest.mark.parametrize("seed", [3, 4])
def test_aggregated_means_equal_ranx(seed):
    ranx = pytest.importorskip("ranx")
    qrels, run, ranked = synthetic_run(seed)
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["mrr@3", "recall@1", "recall@3", "recall@5"])
    rows = [
        {"subset": "FinQA" if i % 2 else "TAT-DQA", **question_metrics(docs, gold, 3, None, None)}
        for i, (docs, gold) in enumerate(ranked.values())
    ]
    table = aggregate(rows, ["mrr_at_3", "recall_at_1", "recall_at_3", "recall_at_5"])
    assert table["avg"]["mrr_at_3"].mean == pytest.approx(100 * theirs["mrr@3"], abs=1e-9)
    for r in (1, 3, 5):
        assert table["avg"][f"recall_at_{r}"].mean == pytest.approx(100 * theirs[f"recall@{r}"], abs=1e-9)


def _lists(seed: int):
    rng = np.random.default_rng(seed)
    docs = [f"c{i}" for i in range(12)]
    dense = [(d, float(s)) for d, s in zip(rng.permutation(docs)[:8], sorted(rng.random(8) * 0.6 + 0.2, reverse=True), strict=True)]
    lexical = [(d, float(s)) for d, s in zip(rng.permutation(docs)[:8], sorted(rng.random(8) * 20, reverse=True), strict=True)]
    return dense, lexical


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rrf_equals_ranx_rrf(seed):
    ranx = pytest.importorskip("ranx")
    dense, lexical = _lists(seed)
    ours = dict(fuse(dense, lexical, k=100, alpha=0.5, fusion="rrf", rrf_k=60))
    fused = ranx.fuse(runs=[ranx.Run({"q": dict(dense)}), ranx.Run({"q": dict(lexical)})], method="rrf", params={"k": 60})
    theirs = fused.to_dict()["q"]
    assert set(ours) == set(theirs)
    for cid, score in theirs.items():  # ours weights each list by alpha = 1/2
        assert 2 * ours[cid] == pytest.approx(score, rel=1e-12), cid


@pytest.mark.parametrize("alpha", [0.3, 0.5, 0.8])
def test_relative_score_fusion_equals_ranx_weighted_min_max_sum(alpha):
    ranx = pytest.importorskip("ranx")
    dense, lexical = _lists(7)
    ours = dict(fuse(dense, lexical, k=100, alpha=alpha, fusion="relative_score"))
    fused = ranx.fuse(
        runs=[ranx.Run({"q": dict(dense)}), ranx.Run({"q": dict(lexical)})],
        norm="min-max",
        method="wsum",
        params={"weights": [alpha, 1 - alpha]},
    )
    theirs = fused.to_dict()["q"]
    assert set(ours) == set(theirs)
    for cid, score in theirs.items():
        assert ours[cid] == pytest.approx(score, abs=1e-12), cid


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_ci_equals_scipy_up_to_rounding(seed):
    stats = pytest.importorskip("scipy.stats")
    values = np.random.default_rng(seed + 10).integers(0, 2, 57).astype(float)
    ours = bootstrap_ci(values, n_boot=1000, seed=seed)
    theirs = stats.bootstrap(
        (values,),
        lambda x, axis: np.mean(x, axis=axis) * 100.0,
        n_resamples=1000,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(seed),
        vectorized=True,
    ).confidence_interval
    # the same resamples: equal up to float rounding of the percentile, not bit for bit (see bootstrap_ci)
    assert ours == pytest.approx((theirs.low, theirs.high), rel=1e-12)
    d = np.random.default_rng(seed).random(40) - 0.4
    pb = paired_bootstrap(d, np.zeros(40), n_boot=3000, seed=seed)
    theirs = stats.bootstrap(
        (d,), np.mean, n_resamples=3000, method="percentile", rng=np.random.default_rng(seed), batch=1000
    ).confidence_interval
    assert (pb.ci_low, pb.ci_high) == pytest.approx((theirs.low, theirs.high), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_permutation_p_equals_scipy(seed):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2, 12).astype(float), rng.integers(0, 2, 12).astype(float)
    ours = permutation_test(a, b, n_perm=10000)
    theirs = stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    assert ours.exact and ours.p_value == pytest.approx(theirs.pvalue, abs=1e-12)
