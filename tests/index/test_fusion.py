"""Fusion and metadata boosts: known answers computed by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from t2exp.index.fusion import fuse, unit_scale
from t2exp.methods.metadata_hybrid import MetadataHybrid


def test_ties_keep_the_dense_order():
    # min-max: dense A=1, B=0; lexical B=1, A=0; alpha 0.5 -> both 0.5: a tie, A is first in dense
    dense = [("A", 0.9), ("B", 0.1)]
    lexical = [("B", 7.0), ("A", 2.0)]
    assert [c for c, _ in fuse(dense, lexical, 2, 0.5)] == ["A", "B"]
    assert [c for c, _ in fuse(dense, lexical, 2, 0.5, "rrf")] == ["A", "B"]  # 0.5/61 + 0.5/62 each


def test_relative_score_and_rrf_by_hand():
    dense = [("A", 0.8), ("B", 0.6), ("C", 0.2)]
    lexical = [("C", 10.0), ("A", 5.0)]
    rel = dict(fuse(dense, lexical, 3, 0.25))
    assert rel["A"] == pytest.approx(0.25 * 1.0 + 0.75 * 0.0)
    assert rel["B"] == pytest.approx(0.25 * (0.4 / 0.6))
    assert rel["C"] == pytest.approx(0.75 * 1.0)
    rrf = dict(fuse(dense, lexical, 3, 0.5, "rrf"))
    assert rrf["A"] == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert rrf["B"] == pytest.approx(0.5 / 62)
    assert rrf["C"] == pytest.approx(0.5 / 63 + 0.5 / 61)


def test_unit_scale_puts_every_fusion_on_zero_one():
    dense = [("A", 0.8), ("B", 0.6)]
    lexical = [("A", 3.0), ("B", 1.0)]
    assert unit_scale(fuse(dense, lexical, 2, 0.5, "rrf"), "rrf", 0.5)[0] == ("A", pytest.approx(1.0))
    assert unit_scale(fuse(dense, lexical, 2, 0.0), "relative_score", 0.0) == [("A", 1.0), ("B", 0.0)]
    rel = fuse(dense, lexical, 2, 0.5)
    assert unit_scale(rel, "relative_score", 0.5) == rel


def _index(companies: dict[str, str]) -> SimpleNamespace:
    docs = {cid: SimpleNamespace(metadata={"company_name": name, "report_year": "2019"}) for cid, name in companies.items()}
    return SimpleNamespace(docs=docs)


@pytest.mark.parametrize("fusion", ["relative_score", "rrf"])
def test_a_small_boost_does_not_swamp_a_large_lead_under_any_fusion(fusion):
    """A (first in both lists) leads B (second in both) by 1 - 61/62 = 0.016 on the unit scale under
    RRF; a company boost of 0.01 on B must not overturn that: the boost
    applies on the unit scale, not to raw RRF scores (~0.016), so A stays first."""
    method = MetadataHybrid(company_boost=0.01, year_boost=0.0, alpha=0.5, fusion=fusion)
    dense = [("A", 0.9), ("B", 0.5), ("C", 0.1)]
    lexical = [("A", 9.0), ("B", 5.0), ("C", 1.0)]
    hits = fuse(dense, lexical, 3, 0.5, fusion)
    index = _index({"A": "Alpha Corp", "B": "Beta Inc", "C": "Gamma plc"})
    ranked = method.boosted_ranking("What was beta's revenue in 2019?", hits, index, 3)
    assert [c for c, _ in ranked][:2] == ["A", "B"]
    big = MetadataHybrid(company_boost=0.6, year_boost=0.0, alpha=0.5, fusion=fusion)
    assert big.boosted_ranking("What was beta's revenue in 2019?", hits, index, 3)[0][0] == "B"


def test_paper_rank_fusion_by_hand():
    """The authors' fusion on a 5-document dense list and a 2-document BM25 list: dense term
    1 - pos/5 (a rank: 1, .8, .6, .4, .2), BM25 term score / best score (C 1.0, E 0.5)."""
    dense = [("A", 0.91), ("B", 0.90), ("C", 0.2), ("D", 0.1), ("E", 0.0)]  # similarities are not used
    lexical = [("C", 10.0), ("E", 5.0)]
    fused = fuse(dense, lexical, 5, 0.5, "paper_rank")
    assert [c for c, _ in fused] == ["C", "A", "B", "E", "D"]
    assert dict(fused) == pytest.approx({"A": 0.5, "B": 0.4, "C": 0.3 + 0.5, "D": 0.2, "E": 0.1 + 0.25})
    # a document only BM25 found gets no dense term; ties keep the dense order
    tie = fuse([("A", 1.0), ("B", 0.5)], [("B", 2.0), ("A", 1.0), ("X", 1.0)], 3, 0.5, "paper_rank")
    assert [c for c, _ in tie] == ["A", "B", "X"] and dict(tie)["X"] == pytest.approx(0.25)
    assert unit_scale(fused, "paper_rank", 0.5) == fused  # already on [0, 1]


def test_rank_bm25_okapi_by_hand():
    """BM25Okapi (k1 1.5, b 0.75) on three equally long documents: a term in one document has
    IDF ln((3 - 1 + 0.5) / (1 + 0.5)); with tf 1 and dl = avgdl its score is that IDF exactly."""
    import math

    from t2exp.index.lexical import RankBM25Index

    index = RankBM25Index(["a", "b", "c"], ["Revenue rose sharply", "costs fell sharply", "margins were flat"])
    (hits,) = index.search(["REVENUE"], 3)  # the paper's tokens: lower-cased whitespace split
    assert hits == [("a", pytest.approx(math.log(2.5 / 1.5)))]
    (both,) = index.search(["revenue sharply"], 3)
    assert [c for c, _ in both] == ["a", "b"]


def test_fuse_paper_is_the_authors_hybrid_by_hand():
    """The authors' HybridBM25RAG on a case worked by hand: dense top-3 a, b, c (1, 2/3, 1/3);
    BM25 over the whole corpus d 10, b 5, then e, a, c at 0, whose fallbacks are 0.9 x 0.5 (the
    smallest positive normalised score) x (1 - pos/5) = 0.27, 0.18, 0.09. Fused (alpha 0.5): a 0.59,
    b 0.5833, d 0.5, c 0.2117, e 0.135 — without the fallback a (0.5) would fall below b."""
    from t2exp.index.fusion import fuse_paper

    dense = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    everything = [("d", 10.0), ("b", 5.0), ("e", 0.0), ("a", 0.0), ("c", 0.0)]
    got = fuse_paper(dense, everything, 5, 0.5)
    assert [c for c, _ in got] == ["a", "b", "d", "c", "e"]
    assert [round(s, 4) for _, s in got] == [0.59, 0.5833, 0.5, 0.2117, 0.135]
    assert [c for c, _ in fuse_paper(dense, everything, 3, 0.5)] == ["a", "b", "d"]
    # no positive BM25 score: the fallback ceiling is 0.9 x 0.1, dense order decides
    flat = [("d", 0.0), ("c", 0.0), ("b", 0.0), ("a", 0.0)]
    assert [c for c, _ in fuse_paper(dense, flat, 4, 0.5)] == ["a", "b", "c", "d"]
