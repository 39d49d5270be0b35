"""The stores' shared corpus, with known dense, BM25 and hybrid orders, and the store factories."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from t2exp.stores.lancedb_store import LanceDBStore
from t2exp.stores.weaviate_store import WeaviateStore

# --- the shared corpus --------------------------------------------------------------------------
IDS = [f"d{i}" for i in range(8)]
TEXTS = [
    "Revenue increased 12% from 2018 to 2019, driven by cloud subscriptions.",
    "Net income fell to $3.2 million in 2019 due to higher interest expense.",
    "Operating expenses were flat at $45 million; headcount declined.",
    "The company repurchased 1.5 million shares of common stock in 2019.",
    "Total assets grew to $120 million, mainly goodwill from the acquisition.",
    "Cash dividends of $0.40 per share were declared in the fourth quarter.",
    "Long-term debt was refinanced at a lower fixed interest rate.",
    "Inventory turnover improved as warehouse costs decreased.",
]
META = [{"company": "ACME", "year": 2019, "row": i} for i in range(8)]
# one-hot document vectors: the cosine of a query with doc i is q_i / |q|, so dense order is known
VECTORS = np.eye(8, dtype=np.float32)
QUERY_VECTORS = np.array(
    [
        [8, 7, 6, 5, 4, 3, 2, 1],
        [4, 7, 3, 8, 6, 5, 1, 2],
        [1, 2, 3, 4, 5, 6, 8, 7],
    ],
    dtype=np.float32,
)
DENSE_ORDER = [[IDS[j] for j in np.argsort(-q, kind="stable")] for q in QUERY_VECTORS]

# BM25 queries whose terms occur in known documents only (no stemming, no stop-word removal)
BM25_QUERIES = [
    "net income interest expense",  # d1 has 4 terms, d6 only "interest"
    "cash dividends per share, shares repurchased?",  # d5: 4 terms, d3: 2 ("shares" != "share")
    "goodwill acquisition total assets",  # d4 only
]
BM25_ORDER = [["d1", "d6"], ["d5", "d3"], ["d4"]]
PUNCTUATED = [
    "What was the change in revenue (in %) between 2018 and 2019?",
    'revenue: "2018" -> 2019 [in %] {growth} + cloud* ~subscriptions^2 AND OR NOT \\ /',
]

Factory = Callable[..., Any]


def build_corpus(store: Any, key: str) -> None:
    assert store.open(key) is False
    store.add(IDS[:5], TEXTS[:5], VECTORS[:5], META[:5])  # two chunks, like indexing.build_index
    store.add(IDS[5:], TEXTS[5:], VECTORS[5:], META[5:])
    store.finalize()


# one hybrid query whose three answers differ: dense prefers d3 > d6 > d1, BM25 d1 > d6; with
# relative-score fusion at alpha 0.5 (both lists min-max normalised over all 8 candidates) d1 wins
# with 0.5 * 3/10 + 0.5 * 1 = 0.65 over d3's 0.5 and d6's 0.5 * 8/10 + 0 = 0.4; rank fusion puts
# d6 (second in both lists) before d3
HYBRID_QUERY = "net income interest expense"
HYBRID_VECTOR = np.array([[0, 3, 0, 10, 0, 0, 8, 0]], dtype=np.float32)
HYBRID_ORDERS = {
    (0.0, "relative_score"): ["d1", "d6"],
    (0.0, "rrf"): ["d1", "d6"],
    (1.0, "relative_score"): ["d3", "d6", "d1"],
    (1.0, "rrf"): ["d3", "d6", "d1"],
    (0.5, "relative_score"): ["d1", "d3", "d6"],
    (0.5, "rrf"): ["d1", "d6", "d3"],
}


# --- store factories ----------------------------------------------------------------------------
def lancedb_stores(tmp_path) -> Iterator[tuple[Factory, str]]:
    uri = tmp_path / "lancedb"
    yield (lambda: LanceDBStore(str(uri))), "finqa__plain__minilm__abc123"


def weaviate_stores(request) -> Iterator[tuple[Factory, str]]:
    """A live server when WEAVIATE_URL (and WEAVIATE_GRPC_PORT) are set, else the stand-in."""
    pytest.importorskip("weaviate")
    url, grpc = os.environ.get("WEAVIATE_URL"), os.environ.get("WEAVIATE_GRPC_PORT")
    if url:
        if not grpc:
            pytest.fail("WEAVIATE_URL is set but WEAVIATE_GRPC_PORT is not: set both to test against a live server")
        host, _, port = url.split("://")[-1].rstrip("/").rpartition(":")
        where = {"connection": "local", "host": host or "localhost", "http_port": int(port), "grpc_port": int(grpc)}
    else:
        where = request.getfixturevalue("weaviate_wire").store_kwargs()
    opened: list[WeaviateStore] = []

    def make(**kw: Any) -> WeaviateStore:
        s = WeaviateStore(**{**where, **kw})
        opened.append(s)
        return s

    key = f"test-stores/{uuid.uuid4().hex[:12]}"
    yield make, key
    if opened and opened[0].collection_name and opened[0].client is not None:
        opened[0].client.collections.delete(opened[0].collection_name)
    for s in opened:
        s.close()
