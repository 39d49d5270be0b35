"""Tokenisers and BM25 indexes (t2exp.index.lexical) with known answers; the LanceDB store's batched
BM25 equals its FTS index, and the build leaves one compacted fragment."""

from __future__ import annotations

import numpy as np
import pytest

from t2exp.index.lexical import BM25sIndex, alnum_tokenize, numeric_tokenize, paper_tokenize
from t2exp.stores.lancedb_store import LanceDBStore


def test_tokenizers_split_numbers_and_tables():
    text = "Revenue in 2019, was $1,234.5 million (12.3)% | Café-Net"
    assert paper_tokenize(text)[:4] == ["revenue", "in", "2019,", "was"]
    assert alnum_tokenize(text) == ["revenue", "in", "2019", "was", "1", "234", "5", "million", "12", "3", "cafe", "net"]
    assert numeric_tokenize(text) == ["2019", "1234.5", "12.3", "revenue", "in", "was", "million", "cafe", "net"]
    assert numeric_tokenize("rates of 3.5% and 4,000; fy2019 v1.2.3") == ["3.5", "4000", "rates", "of", "and", "fy2019", "v1", "2", "3"]
    assert alnum_tokenize("x" * 41 + " ok") == ["ok"]  # LanceDB's max token length


DOCS = {
    "a": "Apple revenue for fiscal 2019, was $1,234 million, up from $1,100 (2018).",
    "b": "Boeing lease obligations (12.3) and revenue of 2,345 in 2019.",
    "c": "Cisco goodwill impairment 2017: 45.6; no revenue table here.",
    "d": "Deere inventory 2019 and inventory 2018 and inventory 2017 rose.",
}


def test_bm25s_known_ranking_with_numeric_tokens():
    ids, texts = list(DOCS), list(DOCS.values())
    paper = BM25sIndex(ids, texts, tokenizer="paper")
    numeric = BM25sIndex(ids, texts, tokenizer="numeric")
    q = ["what was the 1,234 figure in 2019"]
    # paper tokens: "1,234" never meets "$1,234", nor "2019" "2019,"
    assert "a" not in [c for c, _ in paper.search(q, 1)[0]]
    assert numeric.search(q, 1)[0][0][0] == "a"
    assert numeric.search(["(12.3)"], 4)[0][0][0] == "b"
    assert numeric.search(["nothing matches zzz"], 4) == [[]]


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)] + ["2019", "revenue", "$1,234", "(12.3)", "Café"]
    texts = [" ".join(rng.choice(words, size=40)) for _ in range(700)]
    ids = [f"d{i}" for i in range(700)]
    st = LanceDBStore(str(tmp_path / "db"))
    st.open("t")
    vecs = rng.standard_normal((700, 8)).astype(np.float32)
    for s in range(0, 700, 256):  # three add() batches, three fragments, as build_index leaves them
        st.add(ids[s : s + 256], texts[s : s + 256], vecs[s : s + 256], [{}] * len(ids[s : s + 256]))
    assert st.fragments() == 3
    st.finalize()
    return st, texts


def test_store_batched_bm25_equals_its_fts_index(store, tmp_path):
    st, texts = store
    assert st.fragments() == 1  # compacted before the FTS index was built
    rng = np.random.default_rng(1)
    queries = [" ".join(rng.choice(t.split(), size=4)) for t in texts[:60]] + ["revenue 2019 $1,234", "", "zzz"]
    batched = st.bm25(queries, 10)
    st.lexical_batch = False
    single = st.bm25(queries, 10)
    for b, s in zip(batched, single, strict=True):
        assert [v for _, v in b] == pytest.approx([v for _, v in s], rel=1e-5)  # the same scores, rank by rank
        if s:  # the same documents, but for ties at the cut-off (either may be kept)
            cut = s[-1][1] * (1 + 1e-5)
            assert {c for c, v in b if v > cut} == {c for c, v in s if v > cut}
    assert batched[-2] == [] and batched[-1] == []
    # a re-opened store reads the saved mirror
    again = LanceDBStore(str(tmp_path / "db"))
    assert again.open("t")
    assert again.bm25(queries[:5], 10) == batched[:5]
