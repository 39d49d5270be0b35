"""Field-aware, passage-level BM25 (t2exp.index.fielded) and the question's company mention as a filter
(metadata_hybrid company_match=filter), with answers known by hand on small corpora."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from t2exp.data.records import Document, Question
from t2exp.index.fielded import FieldedBM25
from t2exp.methods import Ranking
from t2exp.methods.hybrid import Hybrid
from t2exp.methods.metadata_hybrid import MetadataHybrid


def test_bm25f_score_matches_the_formula_by_hand():
    # two documents; body + company field (weight 2, no length normalisation)
    idx = FieldedBM25(
        ["a", "b"],
        ["alpha beta beta", "gamma"],
        [{"company_name": "acme"}, {"company_name": "beta corp"}],
        {"company_name": 2.0},
        k1=1.2,
        b=0.75,
        tokenizer="alnum",
    )
    (hits,) = idx.search(["beta"], 2)
    # df(beta) = 2 of N = 2 units; avg body length 2
    idf = math.log1p((2 - 2 + 0.5) / (2 + 0.5))
    tf_a = 2 / ((1 - 0.75) + 0.75 * 3 / 2)  # body only
    tf_b = 2.0 * 1 / 1.0  # company field, weight 2, b = 0
    expected = {"a": idf * tf_a / (1.2 + tf_a), "b": idf * tf_b / (1.2 + tf_b)}
    assert dict(hits) == pytest.approx(expected)
    assert [c for c, _ in hits] == sorted(expected, key=lambda c: -expected[c])


def test_company_field_weight_decides_between_two_reports():
    bodies = ["revenue rose in 2019 revenue", "revenue rose in 2019"]
    meta = [{"company_name": "Apple Inc", "report_year": "2018"}, {"company_name": "Boeing Co", "report_year": "2019"}]
    no_fields = FieldedBM25(["apple", "boeing"], bodies, meta, {}, tokenizer="numeric")
    fields = FieldedBM25(["apple", "boeing"], bodies, meta, {"company_name": 3.0, "report_year": 1.0}, tokenizer="numeric")
    q = ["what was boeing revenue in 2019"]
    assert no_fields.search(q, 2)[0][0][0] == "apple"  # more "revenue" in the body
    assert fields.search(q, 2)[0][0][0] == "boeing"  # the company field names it
    assert fields.search(["zzz unknown"], 2) == [[]]


def test_passages_find_the_one_matching_window_of_a_long_document():
    filler = " ".join(f"f{i}" for i in range(400))
    spread = " ".join(["goodwill"] + [f"g{i}" for i in range(58)] + ["impairment"])
    bodies = ["goodwill impairment " + filler, spread]
    ids, meta = ["long", "short"], [{}, {}]
    whole = FieldedBM25(ids, bodies, meta, tokenizer="alnum")
    windows = FieldedBM25(ids, bodies, meta, tokenizer="alnum", passage_words=50, aggregate="max")
    summed = FieldedBM25(ids, bodies, meta, tokenizer="alnum", passage_words=50, aggregate="sum")
    q = ["goodwill impairment"]
    assert whole.search(q, 2)[0][0][0] == "short"  # the long document is diluted by its length
    assert windows.search(q, 2)[0][0][0] == "long"  # its first 50 words hold both terms
    best_max, best_sum = dict(windows.search(q, 2)[0]), dict(summed.search(q, 2)[0])
    assert best_sum["long"] == pytest.approx(best_max["long"])  # one matching passage: sum = max
    assert best_sum["short"] > best_max["short"]  # two passages, one term each


def _index(docs):
    return SimpleNamespace(docs={d.context_id: d for d in docs})


def test_company_filter_keeps_the_named_company_and_counts_a_wrong_filter(monkeypatch):
    docs = [
        Document("c1", "FinQA", "x", {"company_name": "Visa Inc.", "report_year": "2019"}),
        Document("c2", "FinQA", "x", {"company_name": "Boeing Co", "report_year": "2019"}),
        Document("c3", "FinQA", "x", {"company_name": "Visa Inc.", "report_year": "2017"}),
    ]
    index = _index(docs)
    m = MetadataHybrid(company_match="filter", company_boost=0.3, year_boost=0.1, alpha=0.0)
    hits = [("c2", 3.0), ("c1", 2.0), ("c3", 1.0)]
    assert m.company_filter("What was Visa's revenue in 2019?", hits, index) == [("c1", 2.0), ("c3", 1.0)]
    assert m.company_filter("What was the revenue in 2019?", hits, index) == hits  # no company named: no filter
    # through retrieve(), the fused ranking stood in by `hits`; the question's gold is c2: a wrong filter
    monkeypatch.setattr(Hybrid, "retrieve", lambda self, questions, index, k: [Ranking(hits)])
    q = Question("q1", "FinQA", "dev", "c2", "What was Visa revenue in 2019?", 1.0, "1")
    (ranked,) = m.retrieve([q], index, 3)
    assert [c for c, _ in ranked] == ["c1", "c3"]  # c1 first: its year boost; Boeing filtered out
    assert m.stats() == {"metadata_boosted_candidates": 1.0, "metadata_filtered_questions": 1.0, "metadata_filter_dropped_gold": 1.0}
