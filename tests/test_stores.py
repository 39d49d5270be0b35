"""Stores: one contract for LanceDB (embedded default) and Weaviate (production).

Part (a), the contract suite, runs the same tiny financial corpus through every store: dense,
BM25 and hybrid (alpha = 1 / 0) rankings, punctuation-heavy questions, and reopening a persisted
build without re-importing. It always runs against ``LanceDBStore`` (``tmp_path``), and against
``WeaviateStore`` only when a live server is given: ``WEAVIATE_URL=host:port`` (HTTP) and
``WEAVIATE_GRPC_PORT``; otherwise those cases skip with the reason shown.

Part (b) tests the Weaviate adapter at the client-call level without a server: a recording fake of
the *weaviate client object* (what ``weaviate.connect_to_*`` return) is monkeypatched in, and the
tests assert the collection config, batch import and ``failed_objects`` check, query arguments,
collection naming and reuse. A real Weaviate server cannot run on this development machine (no
Docker engine; embedded mode downloads a server binary from GitHub, and no package ships one), so
the live cases in part (a) are skipped here unless a server is reachable.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from t2exp.errors import RemoteError
from t2exp.stores import Store
from t2exp.stores.lancedb_store import LanceDBStore

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

Factory = Callable[[], Any]


def _build(store: Any, key: str) -> None:
    assert store.open(key) is False
    store.add(IDS[:5], TEXTS[:5], VECTORS[:5], META[:5])  # two chunks, like indexing.build_index
    store.add(IDS[5:], TEXTS[5:], VECTORS[5:], META[5:])
    store.finalize()


def _ids(hits: list[tuple[str, float]]) -> list[str]:
    return [cid for cid, _ in hits]


# --- store factories ----------------------------------------------------------------------------
def _lancedb(tmp_path) -> Iterator[tuple[Factory, str]]:
    uri = tmp_path / "lancedb"
    yield (lambda: LanceDBStore(str(uri))), "finqa__plain__minilm__abc123"


def _weaviate(tmp_path) -> Iterator[tuple[Factory, str]]:
    url, grpc = os.environ.get("WEAVIATE_URL"), os.environ.get("WEAVIATE_GRPC_PORT")
    if not url or not grpc:
        pytest.skip("live Weaviate not configured: set WEAVIATE_URL=host:port and WEAVIATE_GRPC_PORT to run")
    from t2exp.stores.weaviate_store import WeaviateStore

    host, _, port = url.split("://")[-1].rstrip("/").rpartition(":")
    opened: list[WeaviateStore] = []

    def make() -> WeaviateStore:
        s = WeaviateStore(connection="local", host=host or "localhost", http_port=int(port), grpc_port=int(grpc))
        opened.append(s)
        return s

    key = f"test-stores/{uuid.uuid4().hex[:12]}"
    yield make, key
    if opened and opened[0].collection_name:
        opened[0].client.collections.delete(opened[0].collection_name)
    for s in opened:
        s.close()


@pytest.fixture(params=["lancedb", pytest.param("weaviate", marks=pytest.mark.weaviate)])
def factory(request, tmp_path) -> Iterator[tuple[Factory, str]]:
    yield from {"lancedb": _lancedb, "weaviate": _weaviate}[request.param](tmp_path)


@pytest.fixture
def built(factory) -> tuple[Any, Factory, str]:
    make, key = factory
    store = make()
    _build(store, key)
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
    # alpha outside [0, 1] is refused by the config schema (tests/test_reliability_config.py)


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


# --- (b) Weaviate adapter against a recording fake client --------------------------------------
from t2exp.stores.weaviate_store import WeaviateStore, collection_name  # noqa: E402  (imports weaviate lazily)


class FakeBatch:
    def __init__(self, col: FakeCollection) -> None:
        self.col = col

    def __enter__(self) -> FakeBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_object(self, properties: dict, uuid: Any = None, vector: Any = None) -> None:
        self.col.server.calls.append(("add_object", self.col.name, properties["context_id"]))
        if properties["context_id"] in self.col.server.reject:
            self.col.failed.append(SimpleNamespace(message=f"vector dimension mismatch for {properties['context_id']}"))
            return
        self.col.objects[str(uuid)] = (dict(properties), np.asarray(vector, dtype=np.float32))


class FakeBatchWrapper:
    def __init__(self, col: FakeCollection) -> None:
        self.col = col

    def fixed_size(self, batch_size: int = 100, concurrent_requests: int = 2) -> FakeBatch:
        self.col.server.calls.append(("fixed_size", self.col.name, batch_size))
        self.col.failed = []  # the real client resets failed_objects per batch context
        return FakeBatch(self.col)

    @property
    def failed_objects(self) -> list[Any]:
        return list(self.col.failed)


class FakeQuery:
    """Records the call and answers from the stored objects (cosine / term overlap)."""

    def __init__(self, col: FakeCollection) -> None:
        self.col = col

    def _ret(self, scored: list[tuple[float, dict]], limit: int, field: str) -> Any:
        scored.sort(key=lambda t: -t[0])
        objs = [
            SimpleNamespace(properties=p, metadata=SimpleNamespace(**{field: (1.0 - s if field == "distance" else s)}))
            for s, p in scored[:limit]
        ]
        return SimpleNamespace(objects=objs)

    def near_vector(self, near_vector: list[float], **kw: Any) -> Any:
        self.col.server.calls.append(("near_vector", kw))
        q = np.asarray(near_vector, dtype=np.float32)
        scored = [(float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)), p) for p, v in self.col.objects.values()]
        return self._ret(scored, kw["limit"], "distance")

    def _overlap(self, query: str) -> list[tuple[float, dict]]:
        terms = set(re.findall(r"[a-z0-9]+", query.lower()))
        scored = [(float(len(terms & set(re.findall(r"[a-z0-9]+", p["text"].lower())))), p) for p, _ in self.col.objects.values()]
        return [t for t in scored if t[0] > 0]

    def bm25(self, query: str, **kw: Any) -> Any:
        self.col.server.calls.append(("bm25", {"query": query, **kw}))
        return self._ret(self._overlap(query), kw["limit"], "score")

    def hybrid(self, query: str, **kw: Any) -> Any:
        self.col.server.calls.append(("hybrid", {"query": query, **kw}))
        return self._ret(self._overlap(query), kw["limit"], "score")


class FakeCollection:
    def __init__(self, server: FakeServer, name: str, description: str | None) -> None:
        self.server, self.name, self.description = server, name, description
        self.objects: dict[str, tuple[dict, np.ndarray]] = {}
        self.failed: list[Any] = []
        self.batch = FakeBatchWrapper(self)
        self.query = FakeQuery(self)
        self.config = SimpleNamespace(
            get=lambda: SimpleNamespace(description=self.description),
            update=self._update,
        )
        self.aggregate = SimpleNamespace(over_all=lambda total_count: SimpleNamespace(total_count=len(self.objects)))

    def _update(self, description: str | None = None, **kw: Any) -> None:
        self.server.calls.append(("update", self.name, description))
        self.description = description


class FakeCollections:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    def exists(self, name: str) -> bool:
        return name in self.server.collections

    def get(self, name: str) -> FakeCollection:
        return self.server.collections[name]

    def create(self, name: str, **kw: Any) -> FakeCollection:
        self.server.calls.append(("create", name, kw))
        col = FakeCollection(self.server, name, kw.get("description"))
        self.server.collections[name] = col
        return col

    def delete(self, name: str) -> None:
        self.server.calls.append(("delete", name))
        self.server.collections.pop(name, None)


class FakeServer:
    """State shared by every fake client, so a second store object sees the first one's build."""

    def __init__(self) -> None:
        self.collections: dict[str, FakeCollection] = {}
        self.calls: list[tuple] = []
        self.reject: set[str] = set()
        self.connects: list[tuple[str, dict]] = []

    def client(self) -> Any:
        return SimpleNamespace(collections=FakeCollections(self), close=lambda: self.calls.append(("close",)))

    def named(self, what: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == what]


@pytest.fixture
def fake(monkeypatch) -> FakeServer:
    weaviate = pytest.importorskip("weaviate")
    server = FakeServer()
    for fn in ("connect_to_local", "connect_to_custom", "connect_to_weaviate_cloud"):
        monkeypatch.setattr(weaviate, fn, lambda _fn=fn, **kw: (server.connects.append((_fn, kw)), server.client())[1])
    return server


def _fake_built(fake: FakeServer, **kw: Any) -> WeaviateStore:
    store = WeaviateStore(batch_size=3, **kw)
    _build(store, "finqa__plain__minilm__abc123")
    return store


def test_weaviate_collection_config(fake: FakeServer) -> None:
    from weaviate.classes.config import VectorDistances

    store = WeaviateStore(host="weaviate.internal", http_port=18080, grpc_port=15051)
    expected = {"host": "weaviate.internal", "port": 18080, "grpc_port": 15051, "auth_credentials": None}
    assert fake.connects == [("connect_to_local", expected)]
    assert store.open("finqa/plain:minilm#abc") is False
    [(_, name, kw)] = fake.named("create")
    assert name == store.collection_name == collection_name("finqa/plain:minilm#abc")
    vc = kw["vector_config"]
    assert vc.vectorizer.vectorizer.value == "none"  # self_provided
    assert vc.vectorIndexType.value == "hnsw"
    assert vc.vectorIndexConfig.distance == VectorDistances.COSINE
    props = {p.name: p for p in kw["properties"]}
    assert set(props) == {"context_id", "text", "metadata"}
    assert props["text"].indexSearchable is True and props["text"].tokenization.value == "word"
    assert "t2exp:complete" not in kw["description"]


def test_weaviate_batch_import_and_marker(fake: FakeServer) -> None:
    from weaviate.util import generate_uuid5

    store = _fake_built(fake)
    assert [c[2] for c in fake.named("fixed_size")] == [3, 3]  # batch_size passed, one context per add()
    col = fake.collections[store.collection_name]
    assert set(col.objects) == {str(generate_uuid5(cid)) for cid in IDS}  # deterministic UUIDs
    props, vec = col.objects[str(generate_uuid5("d2"))]
    assert props["text"] == TEXTS[2] and '"row": 2' in props["metadata"] and vec.tolist() == VECTORS[2].tolist()
    assert store.inserted == 8 and store.count() == 8
    assert fake.named("update") == [("update", store.collection_name, "t2exp:complete rows=8")]


def test_weaviate_failed_objects_raise(fake: FakeServer) -> None:
    fake.reject = {"d1", "d3"}
    store = WeaviateStore(batch_size=10)
    store.open("k")
    with pytest.raises(RemoteError, match=r"2 of 5 objects failed .*first: vector dimension mismatch for d1"):
        store.add(IDS[:5], TEXTS[:5], VECTORS[:5], META[:5])
    assert store.inserted == 0


def test_weaviate_query_arguments(fake: FakeServer) -> None:
    from weaviate.classes.query import HybridFusion

    store = _fake_built(fake, candidate_depth=7)
    fake.calls.clear()
    dense = store.dense(QUERY_VECTORS[:1], 3)
    [(_, kw)] = fake.named("near_vector")
    assert kw["limit"] == 3 and kw["return_metadata"].distance is True
    assert _ids(dense[0]) == DENSE_ORDER[0][:3]
    assert dense[0][0][1] == pytest.approx(8 / np.linalg.norm(QUERY_VECTORS[0]), abs=1e-5)  # 1 - distance

    store.bm25([BM25_QUERIES[0]], 4)
    [(_, kw)] = fake.named("bm25")
    assert kw["query"] == BM25_QUERIES[0] and kw["query_properties"] == ["text"] and kw["limit"] == 4
    assert kw["return_metadata"].score is True

    for fusion, ftype in (("relative_score", HybridFusion.RELATIVE_SCORE), ("rrf", HybridFusion.RANKED)):
        fake.calls.clear()
        store.hybrid([BM25_QUERIES[0]], QUERY_VECTORS[:1], 5, 0.3, fusion)
        [(_, kw)] = fake.named("hybrid")
        assert kw["alpha"] == 0.3 and kw["fusion_type"] == ftype and kw["limit"] == 5
        assert kw["query"] == BM25_QUERIES[0] and kw["vector"] == QUERY_VECTORS[0].tolist()

    fake.calls.clear()
    store.native_hybrid = False  # our fusion over near_vector + bm25 candidate lists
    store.hybrid([BM25_QUERIES[0]], QUERY_VECTORS[:1], 2, 0.3, "relative_score")
    assert not fake.named("hybrid")
    assert fake.named("near_vector")[0][1]["limit"] == 7 and fake.named("bm25")[0][1]["limit"] == 7


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


def test_weaviate_reuses_complete_collection(fake: FakeServer) -> None:
    first = _fake_built(fake)
    fake.calls.clear()
    again = WeaviateStore()
    assert again.open("finqa__plain__minilm__abc123") is True
    assert again.inserted == 0 and again.count() == 8
    assert not fake.named("create") and not fake.named("delete") and not fake.named("add_object")
    assert again.collection_name == first.collection_name


def test_weaviate_drops_incomplete_collection(fake: FakeServer) -> None:
    store = WeaviateStore()
    store.open("k")
    store.add(IDS[:2], TEXTS[:2], VECTORS[:2], META[:2])  # no finalize()
    again = WeaviateStore()
    assert again.open("k") is False
    assert fake.named("delete") == [("delete", collection_name("k"))]
    assert again.count() == 0


def test_weaviate_connection_modes(fake: FakeServer, monkeypatch) -> None:
    monkeypatch.setenv("MY_WV_KEY", "secret")
    WeaviateStore(connection="custom", host="h", http_port=1, grpc_port=2, http_secure=True, grpc_secure=True, api_key_env="MY_WV_KEY")
    WeaviateStore(connection="cloud", cluster_url="https://c.weaviate.cloud", api_key_env="MY_WV_KEY")
    (fn1, kw1), (fn2, kw2) = fake.connects
    assert fn1 == "connect_to_custom" and kw1["grpc_host"] == "h" and kw1["http_secure"] and kw1["grpc_secure"]
    assert fn2 == "connect_to_weaviate_cloud" and kw2["cluster_url"] == "https://c.weaviate.cloud"
    assert kw1["auth_credentials"].api_key == "secret" and kw2["auth_credentials"].api_key == "secret"
    # a bad connection, a cloud store without URL or key: refused by the config (test_reliability_config)


def test_weaviate_close_and_context_manager(fake: FakeServer) -> None:
    with WeaviateStore() as store:
        assert store.client is not None
    assert store.client is None and fake.named("close") == [("close",)]
    store.close()  # idempotent
    assert len(fake.named("close")) == 1


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
    """Issue 17, item 3: a table whose completion marker remains but whose data files are gone was
    opened as complete and the run died with `lance error: Not found`."""
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
