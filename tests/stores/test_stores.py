"""Stores: one contract for LanceDB (embedded default) and Weaviate (production).

Part (a), the contract suite, runs the same tiny financial corpus through every store: dense,
BM25 and hybrid rankings (alpha 0 / 0.5 / 1, both fusions), punctuation-heavy questions, and
reopening a persisted build without re-importing. It runs against ``LanceDBStore`` (``tmp_path``)
and against ``WeaviateStore`` through the unmodified weaviate-client: by default against the
loopback stand-in ``tests/weaviate_wire`` (REST + gRPC, the client's own protocol definitions),
against a live server when ``WEAVIATE_URL=host:port`` (HTTP) and ``WEAVIATE_GRPC_PORT`` are set.

Part (b) checks collection naming, the one-line error for an unreachable server and lazy
imports; the Weaviate-only checks through the same client are in ``tests/stores/test_weaviate_store.py``.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from helpers.stores import (
    BM25_ORDER,
    BM25_QUERIES,
    DENSE_ORDER,
    HYBRID_ORDERS,
    HYBRID_QUERY,
    HYBRID_VECTOR,
    IDS,
    META,
    PUNCTUATED,
    QUERY_VECTORS,
    TEXTS,
    VECTORS,
    Factory,
    build_corpus,
    lancedb_stores,
    weaviate_stores,
)
from t2exp.errors import RemoteError
from t2exp.index.store import Store
from t2exp.stores.lancedb_store import LanceDBStore
from t2exp.stores.weaviate_store import WeaviateStore, collection_name


def _ids(hits: list[tuple[str, float]]) -> list[str]:
    return [cid for cid, _ in hits]


@pytest.fixture(params=["lancedb", pytest.param("weaviate", marks=pytest.mark.weaviate)])
def factory(request, tmp_path) -> Iterator[tuple[Factory, str]]:
    if request.param == "weaviate":
        yield from weaviate_stores(request)
    else:
        yield from lancedb_stores(tmp_path)


@pytest.fixture
def built(factory) -> tuple[Any, Factory, str]:
    make, key = factory
    store = make()
    build_corpus(store, key)
    return store, make, key


# --- (a) contract -------------------------------------------------------------------------------
def test_store_protocol_and_count(built) -> None:
    store, _, _ = built
    assert isinstance(store, Store)
    assert store.count() == 8
    assert store.inserted == 8


def test_dense_order(built) -> None:
    store, _, _ = built
    full = store.dense(QUERY_VECTORS, 8)
    assert [_ids(h) for h in full] == DENSE_ORDER
    top3 = store.dense(QUERY_VECTORS, 3)
    assert [_ids(h) for h in top3] == [o[:3] for o in DENSE_ORDER]
    # score = 1 - cosine distance = cosine similarity
    q = QUERY_VECTORS[0]
    assert top3[0][0][1] == pytest.approx(q.max() / np.linalg.norm(q), abs=1e-4)
    assert store.dense(QUERY_VECTORS[:0], 3) == []


def test_bm25_order(built) -> None:
    store, _, _ = built
    hits = store.bm25(BM25_QUERIES, 3)
    assert [_ids(h) for h in hits] == BM25_ORDER
    for h in hits:
        scores = [s for _, s in h]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert store.bm25(["", "   "], 3) == [[], []]


def test_bm25_punctuation(built) -> None:
    store, _, _ = built
    hits = store.bm25(PUNCTUATED, 3)
    assert [h[0][0] for h in hits] == ["d0", "d0"]


@pytest.mark.parametrize("fusion", ["relative_score", "rrf"])
def test_hybrid_extremes(built, fusion: str) -> None:
    store, _, _ = built
    queries = BM25_QUERIES
    dense = store.dense(QUERY_VECTORS, 2)
    lexical = store.bm25(queries, 2)
    assert [_ids(h) for h in store.hybrid(queries, QUERY_VECTORS, 2, 1.0, fusion)] == [_ids(h) for h in dense]
    assert [_ids(h) for h in store.hybrid(queries, QUERY_VECTORS, 2, 0.0, fusion)] == [_ids(h) for h in lexical]


def test_hybrid_mixes_both(built) -> None:
    store, _, _ = built
    # query 0: dense prefers d0, BM25 (punctuated question) prefers d0 too -> d0 first at any alpha
    hits = store.hybrid([PUNCTUATED[0]], QUERY_VECTORS[:1], 3, 0.5, "relative_score")
    assert len(hits[0]) == 3 and len(set(_ids(hits[0]))) == 3 and hits[0][0][0] == "d0"
    # alpha outside [0, 1] is refused by the config schema (tests/config/test_reliability_config.py)


def test_reopen_reuses_without_inserts(built) -> None:
    store, make, key = built
    before = (store.dense(QUERY_VECTORS, 4), store.bm25(BM25_QUERIES + PUNCTUATED, 3))
    again = make()
    assert again.open(key) is True
    assert again.inserted == 0
    assert again.count() == 8
    after = (again.dense(QUERY_VECTORS, 4), again.bm25(BM25_QUERIES + PUNCTUATED, 3))
    for b, a in zip(before, after, strict=True):
        assert [_ids(h) for h in a] == [_ids(h) for h in b]
        assert np.allclose([s for h in a for _, s in h], [s for h in b for _, s in h], atol=1e-5)
    assert [_ids(h) for h in again.hybrid(BM25_QUERIES, QUERY_VECTORS, 3, 0.0)] == BM25_ORDER


def test_interrupted_build_is_rebuilt(factory) -> None:
    make, key = factory
    first = make()
    assert first.open(key) is False
    first.add(IDS[:3], TEXTS[:3], VECTORS[:3], META[:3])  # no finalize(): an interrupted build
    second = make()
    assert second.open(key) is False
    second.add(IDS, TEXTS, VECTORS, META)
    second.finalize()
    assert second.count() == 8


@pytest.mark.parametrize("fusion", ["relative_score", "rrf"])
def test_hybrid_alpha_gives_bm25_fused_and_dense_orders(built, fusion: str) -> None:
    """The same hybrid query at alpha 0 / 0.5 / 1: the BM25 order, the fused order (different from
    both), the dense order -- the meaning of alpha both stores share."""
    store, _, _ = built
    for alpha in (0.0, 0.5, 1.0):
        hits = store.hybrid([HYBRID_QUERY], HYBRID_VECTOR, 3, alpha, fusion)
        assert _ids(hits[0]) == HYBRID_ORDERS[(alpha, fusion)], (alpha, fusion)
    assert _ids(store.bm25([HYBRID_QUERY], 3)[0]) == HYBRID_ORDERS[(0.0, fusion)]
    assert _ids(store.dense(HYBRID_VECTOR, 3)[0]) == HYBRID_ORDERS[(1.0, fusion)]
    if fusion == "relative_score":  # alpha * normalised dense + (1 - alpha) * normalised BM25
        scores = [s for _, s in store.hybrid([HYBRID_QUERY], HYBRID_VECTOR, 3, 0.5, fusion)[0]]
        assert scores == pytest.approx([0.65, 0.5, 0.4], abs=1e-5)


# --- (b) collection naming, connection errors, lazy imports -----------------------------------------
@pytest.mark.parametrize(
    "key",
    ["finqa__plain__minilm__abc123", "tat-dqa/metadata_prefix:e5-large#9f8e", "0starts-with-digit", "x" * 400, "ümlaut key"],
)
def test_weaviate_collection_name_valid(key: str) -> None:
    name = collection_name(key)
    assert re.fullmatch(r"[A-Z][A-Za-z0-9_]*", name) and len(name) <= 255
    assert collection_name(key) == name


def test_weaviate_collection_names_do_not_collide() -> None:
    assert collection_name("a-b") != collection_name("a.b")
    assert collection_name("x" * 300 + "1") != collection_name("x" * 300 + "2")


def test_weaviate_unreachable_server_is_one_line_remote_error() -> None:
    """Real client, nothing listening: a RemoteError naming host, ports and the docker fix."""
    pytest.importorskip("weaviate")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteError) as exc:
        WeaviateStore(host="127.0.0.1", http_port=port, grpc_port=port + 1)
    msg = str(exc.value)
    assert "\n" not in msg and f"http_port={port}" in msg and f"grpc_port={port + 1}" in msg and "docker run" in msg


def test_import_t2exp_does_not_import_weaviate() -> None:
    code = "import sys, t2exp, t2exp.stores, t2exp.stores.weaviate_store; assert 'weaviate' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_lancedb_table_with_lost_data_files_is_rebuilt_not_trusted(tmp_path) -> None:
    """A table whose completion marker remains but whose data files are gone is not opened as
    complete: it is rebuilt from the cached embeddings and answers queries again."""
    import shutil

    vecs = np.eye(4, 8, dtype=np.float32)
    store = LanceDBStore(str(tmp_path / "db"))
    assert store.open("k1") is False
    store.add(["a", "b", "c", "d"], ["alpha", "beta", "gamma", "delta"], vecs, [{}] * 4)
    store.finalize()
    data = tmp_path / "db" / f"{store.table_name}.lance" / "data"
    shutil.rmtree(data)  # the fragments are gone, the marker stays
    again = LanceDBStore(str(tmp_path / "db"))
    assert again.open("k1") is False  # rebuilt from the cached embeddings, not trusted
    again.add(["a", "b", "c", "d"], ["alpha", "beta", "gamma", "delta"], vecs, [{}] * 4)
    again.finalize()
    assert [c for c, _ in again.dense(vecs[:1], 1)[0]] == ["a"]
    assert LanceDBStore(str(tmp_path / "db")).open("k1") is True  # an intact table is reused
