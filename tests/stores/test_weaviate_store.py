"""The Weaviate store through the real weaviate-client, beyond the shared contract
(``tests/stores/test_stores.py``; the corpus and factories both use are in ``helpers.stores``).

Part (b) runs against the stand-in (tests/weaviate_wire) or, with ``WEAVIATE_URL`` and
``WEAVIATE_GRPC_PORT`` set, a live server: the collection schema the adapter creates as the server
reports it back, batch-import errors, native vs own hybrid fusion, the server's own alpha.
Part (c) needs the stand-in itself (its request log): a complete collection is reused with zero
imports, an incomplete one is dropped, connection=custom, the query arguments the adapter sends
(limits, property, alpha, fusion type, candidate_depth) and the API key as a bearer token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest

from helpers.stores import (
    BM25_QUERIES,
    HYBRID_ORDERS,
    HYBRID_QUERY,
    HYBRID_VECTOR,
    IDS,
    META,
    QUERY_VECTORS,
    TEXTS,
    VECTORS,
    Factory,
    build_corpus,
    weaviate_stores,
)
from t2exp.errors import RemoteError
from t2exp.stores.weaviate_store import WeaviateStore, collection_name

pytestmark = pytest.mark.weaviate


@pytest.fixture
def weaviate_factory(request) -> Iterator[tuple[Factory, str]]:
    yield from weaviate_stores(request)


# --- (b) the stand-in, or a live server ---------------------------------------------------------
def test_weaviate_collection_schema_as_the_server_reports_it(weaviate_factory) -> None:
    """Self-provided vectors in a cosine HNSW index, the three properties with their tokenisation and
    indexes, no stop words, BM25 defaults: read back from the server through the client."""
    from weaviate.classes.config import StopwordsPreset, Tokenization, VectorDistances

    make, key = weaviate_factory
    store = make()
    build_corpus(store, key)
    cfg = store.client.collections.get(store.collection_name).config.get()
    assert cfg.name == store.collection_name == collection_name(key)
    assert cfg.description == "t2exp:complete rows=8"
    [(vname, vec)] = cfg.vector_config.items()
    assert vec.vectorizer.vectorizer.value == "none"
    assert vec.vector_index_config.distance_metric == VectorDistances.COSINE
    assert type(vec.vector_index_config).__name__ == "_VectorIndexConfigHNSW"
    props = {p.name: p for p in cfg.properties}
    assert set(props) == {"context_id", "text", "metadata"}
    assert props["text"].tokenization == Tokenization.WORD and props["text"].index_searchable is True
    assert props["context_id"].tokenization == Tokenization.FIELD and props["context_id"].index_searchable is False
    assert props["metadata"].index_searchable is False and props["metadata"].index_filterable is False
    assert cfg.inverted_index_config.stopwords.preset == StopwordsPreset.NONE
    assert (cfg.inverted_index_config.bm25.k1, cfg.inverted_index_config.bm25.b) == (1.2, 0.75)


def test_weaviate_failed_objects_raise_count_and_first_message(weaviate_factory) -> None:
    """Objects the server rejects (vectors of another length than the index holds): the batch
    reports them per object, the store raises one line with the count and the first message."""
    make, key = weaviate_factory
    store = make(batch_size=2)  # 3 objects: two import requests, both refused
    assert store.open(key) is False
    store.add(IDS[:5], TEXTS[:5], VECTORS[:5], META[:5])
    with pytest.raises(RemoteError) as exc:
        store.add(IDS[5:], TEXTS[5:], np.ones((3, 4), dtype=np.float32), META[5:])
    msg = str(exc.value)
    assert "\n" not in msg
    assert re.search(r"3 of 3 objects failed to import into T2exp_\w+; first: .*length 4.*length 8", msg), msg
    assert store.inserted == 5 and store.count() == 5


@pytest.mark.parametrize("fusion", ["relative_score", "rrf"])
def test_weaviate_native_and_own_fusion_agree_on_a_small_corpus(weaviate_factory, fusion: str) -> None:
    """native_hybrid=true (Weaviate's query.hybrid, sub-searches of at least 100) and false
    (t2exp.index.fusion over near_vector + bm25 lists of candidate_depth=50): on 8 documents both fuse the
    complete lists, so they must agree (relative score: the scores too). Queries of the contract
    suite plus the alpha query, at alpha 0.3 and 0.5."""
    make, key = weaviate_factory
    native = make(native_hybrid=True)
    build_corpus(native, key)
    own = make(native_hybrid=False)
    assert own.open(key) is True
    queries = [HYBRID_QUERY, *BM25_QUERIES]
    vectors = np.vstack([HYBRID_VECTOR, QUERY_VECTORS])
    for alpha in (0.3, 0.5):
        a = native.hybrid(queries, vectors, 4, alpha, fusion)
        b = own.hybrid(queries, vectors, 4, alpha, fusion)
        # exact ties among documents with zero similarity and no keyword match may be ordered
        # differently: compare the documents with a positive fused score
        assert [[c for c, s in h if s > 1e-9] for h in a] == [[c for c, s in h if s > 1e-9] for h in b], alpha
        if fusion == "relative_score":
            assert np.allclose([s for h in a for _, s in h], [s for h in b for _, s in h], atol=1e-5)


def test_weaviate_server_hybrid_alpha_extremes(weaviate_factory) -> None:
    """The server's own alpha (the store answers alpha 0 / 1 without query.hybrid): through the
    client, alpha=0 is the BM25 order with BM25 scores, alpha=1 the near_vector order."""
    from weaviate.classes.query import HybridFusion, MetadataQuery

    make, key = weaviate_factory
    store = make()
    build_corpus(store, key)
    col = store.client.collections.get(store.collection_name)
    for fusion in (HybridFusion.RELATIVE_SCORE, HybridFusion.RANKED):
        res = {}
        for alpha in (0.0, 0.5, 1.0):
            out = col.query.hybrid(
                query=HYBRID_QUERY,
                vector=HYBRID_VECTOR[0].tolist(),
                alpha=alpha,
                fusion_type=fusion,
                query_properties=["text"],
                limit=3,
                return_metadata=MetadataQuery(score=True),
            )
            res[alpha] = [o.properties["context_id"] for o in out.objects]
        name = "rrf" if fusion == HybridFusion.RANKED else "relative_score"
        assert res[0.0] == HYBRID_ORDERS[(0.0, name)] and res[1.0] == HYBRID_ORDERS[(1.0, name)]
        assert res[0.5] == HYBRID_ORDERS[(0.5, name)]


# --- (c) against the stand-in's request log -------------------------------------------------------
def test_weaviate_custom_connection_and_close(weaviate_wire) -> None:
    """connection=custom reaches the same server (connect_to_custom); close() is idempotent."""
    where = weaviate_wire.store_kwargs()
    with WeaviateStore(connection="custom", host=where["host"], http_port=where["http_port"], grpc_port=where["grpc_port"]) as store:
        assert store.client.is_ready()
        assert store.open("k") is False
    assert store.client is None
    store.close()
    assert "REST GET /v1/meta" in weaviate_wire.db.requests


def test_weaviate_reuses_complete_collection_with_zero_imports(weaviate_wire) -> None:
    first = WeaviateStore(**weaviate_wire.store_kwargs(), batch_size=3)
    build_corpus(first, "finqa__plain__minilm__abc123")
    assert weaviate_wire.db.requests.count("gRPC BatchObjects") == 3  # add(5 objects) + add(3), batches of 3: 3 + 2, 3
    weaviate_wire.db.requests.clear()
    again = WeaviateStore(**weaviate_wire.store_kwargs())
    assert again.open("finqa__plain__minilm__abc123") is True
    assert again.inserted == 0 and again.count() == 8 and again.collection_name == first.collection_name
    seen = weaviate_wire.db.requests
    assert not [r for r in seen if "BatchObjects" in r or r.startswith(("REST POST", "REST DELETE", "REST PUT"))], seen
    assert again.dense(QUERY_VECTORS[:1], 2)[0][0][0] == "d0"
    # what was stored: deterministic UUIDs, the properties and the vectors as sent
    from weaviate.util import generate_uuid5

    obj = weaviate_wire.db.get(first.collection_name).objects[str(generate_uuid5("d2"))]
    assert obj.properties["text"] == TEXTS[2] and '"row": 2' in obj.properties["metadata"]
    assert obj.vectors["default"].tolist() == VECTORS[2].tolist()
    assert weaviate_wire.db.unmodelled == []


def test_weaviate_drops_incomplete_collection(weaviate_wire) -> None:
    store = WeaviateStore(**weaviate_wire.store_kwargs())
    store.open("k")
    store.add(IDS[:2], TEXTS[:2], VECTORS[:2], META[:2])  # no finalize(): still "t2exp:building"
    weaviate_wire.db.requests.clear()
    again = WeaviateStore(**weaviate_wire.store_kwargs())
    assert again.open("k") is False
    assert f"REST DELETE /v1/schema/{collection_name('k')}" in weaviate_wire.db.requests
    assert again.count() == 0


def test_weaviate_query_arguments_on_the_wire(weaviate_wire) -> None:
    """What the adapter sends: limits, the searched property, alpha, the fusion type; with
    native_hybrid=false two searches of candidate_depth and no hybrid request."""
    store = WeaviateStore(**weaviate_wire.store_kwargs(), candidate_depth=7)
    build_corpus(store, "k")
    db = weaviate_wire.db
    db.searches.clear()
    store.dense(QUERY_VECTORS[:1], 3)
    store.bm25([BM25_QUERIES[0]], 4)
    store.hybrid([HYBRID_QUERY], HYBRID_VECTOR, 5, 0.3, "relative_score")
    store.hybrid([HYBRID_QUERY], HYBRID_VECTOR, 5, 0.3, "rrf")
    assert db.searches == [
        {"kind": "near_vector", "limit": 3},
        {"kind": "bm25_search", "limit": 4, "query": BM25_QUERIES[0], "properties": ["text"]},
        {
            "kind": "hybrid_search",
            "limit": 5,
            "query": HYBRID_QUERY,
            "properties": ["text"],
            "alpha": pytest.approx(0.3),
            "fusion": "FUSION_TYPE_RELATIVE_SCORE",
        },
        {
            "kind": "hybrid_search",
            "limit": 5,
            "query": HYBRID_QUERY,
            "properties": ["text"],
            "alpha": pytest.approx(0.3),
            "fusion": "FUSION_TYPE_RANKED",
        },
    ]
    db.searches.clear()
    store.native_hybrid = False
    store.hybrid([HYBRID_QUERY], HYBRID_VECTOR, 2, 0.3, "relative_score")
    assert [(s["kind"], s["limit"]) for s in db.searches] == [("near_vector", 7), ("bm25_search", 7)]
    store.close()


def test_weaviate_api_key_is_sent(weaviate_wire, monkeypatch) -> None:
    """api_key_env names the variable; its value goes out as a bearer token on REST and gRPC."""
    monkeypatch.setenv("MY_WV_KEY", "secret-123")
    store = WeaviateStore(**weaviate_wire.store_kwargs(), api_key_env="MY_WV_KEY")
    store.open("k")
    store.count()
    assert "Bearer secret-123" in weaviate_wire.db.authorization
    assert len(set(weaviate_wire.db.authorization)) == 1
    assert not [r for r in weaviate_wire.db.requests if "openid-configuration" in r]  # an API key needs no OIDC probe
    store.close()
    monkeypatch.delenv("MY_WV_KEY")
    weaviate_wire.db.authorization.clear()
    with WeaviateStore(**weaviate_wire.store_kwargs(), api_key_env="MY_WV_KEY") as anonymous:
        anonymous.open("k")
    assert weaviate_wire.db.authorization == []


# --- (d) connection=embedded: the client's start-up arguments, no server started -----------------
@pytest.fixture
def embedded_calls(monkeypatch) -> list[dict]:
    """What ``weaviate.connect_to_embedded`` receives; no server starts and nothing is downloaded
    (``urlretrieve`` raises)."""
    import urllib.request

    import weaviate

    calls: list[dict] = []

    class Client:
        def close(self) -> None:
            calls.append({"closed": True})

    def connect_to_embedded(**kwargs):
        calls.append(kwargs)
        return Client()

    def no_download(url, *a, **k):
        raise AssertionError(f"a download of {url}")

    monkeypatch.setattr(weaviate, "connect_to_embedded", connect_to_embedded)
    monkeypatch.setattr(urllib.request, "urlretrieve", no_download)
    return calls


def _embedded_store(tmp_path, binary: str):
    from helpers.app import compose_cfg
    from t2exp.pipeline.build import build_component

    return build_component(compose_cfg("store=weaviate_embedded", f"store.binary={binary}", f"paths.cache={tmp_path / 'cache'}").store)


def test_weaviate_embedded_starts_the_binary_given_without_a_download(tmp_path, embedded_calls) -> None:
    """store=weaviate_embedded with a server binary: the client's options put the data under
    store.embedded_dir and find the binary where the client looks for it, so its own start-up code
    runs that file and downloads nothing."""
    from weaviate.embedded import EmbeddedOptions, EmbeddedV4

    binary = tmp_path / "weaviate"
    binary.write_bytes(b"#!/bin/sh\n")
    binary.chmod(0o755)
    with _embedded_store(tmp_path, str(binary)):
        pass
    kwargs, closed = embedded_calls
    root = tmp_path / "cache" / "weaviate_embedded"
    assert closed == {"closed": True}
    assert (kwargs["hostname"], kwargs["port"], kwargs["grpc_port"]) == ("127.0.0.1", 8079, 50060)
    assert (kwargs["persistence_data_path"], kwargs["binary_path"]) == (str(root / "data"), str(root / "bin"))
    server = EmbeddedV4(EmbeddedOptions(**{("additional_env_vars" if k == "environment_variables" else k): v for k, v in kwargs.items()}))
    server.ensure_weaviate_binary_exists()  # the client's own lookup (urlretrieve raises)
    assert server._weaviate_binary_path.resolve() == binary.resolve()
    with _embedded_store(tmp_path, str(binary)):  # a second run links it again
        pass
    assert embedded_calls[2] == kwargs


def test_weaviate_embedded_takes_a_tarball_url_as_the_clients_version(tmp_path, embedded_calls) -> None:
    url = "http://localhost:8000/weaviate-v1.40.3-linux-amd64.tar.gz"
    _embedded_store(tmp_path, url).close()
    assert embedded_calls[0]["version"] == url
    assert embedded_calls[0]["binary_path"] == str(tmp_path / "cache" / "weaviate_embedded" / "bin")


def test_weaviate_embedded_without_a_binary_is_one_line_before_any_work(tmp_path, embedded_calls) -> None:
    from helpers.command import cli
    from t2exp.__main__ import main

    proc = cli(main, ["store=weaviate_embedded", "generator=none", f"paths.work={tmp_path}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("t2exp: error: store.binary=None is invalid") and "\n" not in proc.stderr.strip()
    assert embedded_calls == [] and list(tmp_path.iterdir()) == []
