"""End to end: ``python -m t2exp -m rag_method=base,hybrid store=weaviate ...`` against the Weaviate
stand-in (tests/weaviate_wire, through the real weaviate-client), retrieval only, compared with the
same sweep on the embedded LanceDB store.

The two stores are specified to agree on dense search (exact cosine over the same vectors):
``rag_method=base`` is dense only, and ``rag_method=hybrid`` with its default ``lexical=bm25s``
fuses the store's dense list with t2exp's own BM25 index, so every retrieval metric of both cells
must be equal. The stores' own BM25 (``rag_method.lexical=store``) differs (LanceDB's full-text
index vs Weaviate's BM25F); docs/config/store.md quotes that difference, measured with the same data.
"""

from __future__ import annotations

import pytest

from helpers.app import run_app
from helpers.tracking import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.weaviate, pytest.mark.full]

METRICS = ("mrr_at_3", "recall_at_1", "recall_at_3", "recall_at_5")
SUBSETS = ("FinQA", "TAT-DQA", "avg")


def _by_method(tracking_dir) -> dict:
    _, runs = mlflow_runs(tracking_dir)
    children = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
    assert all(r.info.status == "FINISHED" for r in children)
    return {r.data.params["rag_method.name"]: r for r in children}


def test_weaviate_sweep_matches_lancedb_where_specified(tmp_path, warm_cache, weaviate_wire) -> None:
    cache = warm_cache  # shared by both sweeps, with the corpora's vectors in it; indices are keyed by store
    sweep = ["-m", "rag_method=base,hybrid", "generator=none", "dataset.limit=40"]
    run_app([*sweep, *weaviate_wire.overrides()], cache, tmp_path / "weaviate")
    run_app([*sweep, "store=lancedb"], cache, tmp_path / "lancedb")
    wv, lance = _by_method(tmp_path / "weaviate"), _by_method(tmp_path / "lancedb")
    assert set(wv) == set(lance) == {"base", "hybrid"}

    # the Weaviate cells really went through the stand-in: both corpora imported over gRPC, the
    # second cell reused the collections the first one built (zero inserts), queries were gRPC Search
    db = weaviate_wire.db
    assert sorted(len(c.objects) for c in db.collections.values()) == [274, 299]
    assert all(c.schema["description"].startswith("t2exp:complete rows=") for c in db.collections.values())
    assert db.requests.count("gRPC Search") >= 2 * 80 and "gRPC BatchObjects" in db.requests
    assert db.unmodelled == []
    assert wv["base"].data.params["store._target_"].endswith("WeaviateStore")
    assert lance["base"].data.params["store._target_"].endswith("LanceDBStore")
    assert wv["base"].data.metrics["FinQA/index_inserted"] == 299.0
    assert wv["hybrid"].data.metrics["FinQA/index_inserted"] == 0.0 and wv["hybrid"].data.metrics["FinQA/index_cache_hit"] == 1.0

    for method in ("base", "hybrid"):
        for subset in SUBSETS:
            for name in METRICS:
                key = f"{subset}/{name}"
                assert wv[method].data.metrics[key] == lance[method].data.metrics[key], (method, key)
    assert wv["base"].data.metrics["avg/mrr_at_3"] > 0  # a real ranking, not two empty ones
