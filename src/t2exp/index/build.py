"""Index stage: embed a subset's corpus once and persist it in a store, keyed by content.

Index key = (subset, corpus content hash, embedder fingerprint + document template, document
variant, store name). A second run, or another sweep cell, with the same key opens the existing
collection and inserts nothing; concurrent builders serialise on a file lock.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from t2exp.data.records import Document, Subset
from t2exp.embedders import Embedder
from t2exp.index import documents
from t2exp.index.fielded import FieldedBM25
from t2exp.index.lexical import LEXICAL_INDEXES, BM25sIndex, RankBM25Index
from t2exp.index.store import Store
from t2exp.infra import progress
from t2exp.infra.cache import build_lock, content_key

log = logging.getLogger(__name__)


@dataclass
class Index:
    """Everything retrieval needs for one subset."""

    subset: Subset
    store: Store | None  # None: a method that reads no store (oracle)
    embedder: Embedder
    variant: str
    key: str
    cache_hit: bool
    build_seconds: float
    docs: dict[str, Document] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # indexed text per context_id
    _lexical: dict[str, BM25sIndex | RankBM25Index | FieldedBM25] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)

    def lexical(self, name: str, settings: Mapping[str, Any] | None = None) -> BM25sIndex | RankBM25Index | FieldedBM25:
        """The in-memory BM25 index ``name``, built on first use with ``settings``
        (``rag_method.bm25``: tokenizer, k1, b; fields and passages for ``fielded``):
        ``bm25s`` / ``rank_bm25`` (``t2exp.index.lexical``) over the indexed texts, ``fielded``
        (``t2exp.index.fielded``) over each document's own text and metadata fields."""
        s = dict(settings or {})
        key = json.dumps([name, s], sort_keys=True, default=str)
        if key not in self._lexical:
            ids = list(self.texts)
            bm = {k: s[k] for k in ("k1", "b", "tokenizer") if k in s}
            if name == "fielded":
                self._lexical[key] = FieldedBM25(
                    ids,
                    [self.docs[i].text for i in ids],
                    [self.docs[i].metadata for i in ids],
                    dict(s.get("fields") or {}),
                    body_weight=float(s.get("body_weight", 1.0)),
                    passage_words=s.get("passage_words"),
                    aggregate=str(s.get("passage_agg", "max")),
                    **bm,
                )
            else:
                self._lexical[key] = LEXICAL_INDEXES[name](ids, [self.texts[i] for i in ids], **bm)
        return self._lexical[key]

    @property
    def bm25s(self) -> BM25sIndex | RankBM25Index | FieldedBM25:
        return self.lexical("bm25s")

    def size(self) -> int:
        return len(self.docs)


def index_key(subset: Subset, embedder: Embedder, variant: str, store_name: str, texts_hash: str) -> str:
    tpl = getattr(embedder, "document_template", "{text}")
    return (
        f"{subset.name}_{variant}_{embedder.name}_"
        + content_key(subset.content_hash, texts_hash, embedder.fingerprint, tpl, variant, store_name)[:16]
    )


def build_index(
    subset: Subset,
    embedder: Embedder,
    store: Store,
    variant: str,
    lock_dir: str | Path,
    *,
    batch_size: int = 64,  # documents per embed + store call: the bar's step
    texts: dict[str, str] | None = None,
    key_suffix: str = "",
) -> Index:
    """Open or build the collection for ``subset``. ``texts`` overrides the indexed text per
    context id (e.g. summaries); by default the document variant renders it."""
    docs = {d.context_id: d for d in subset.corpus}
    if texts is None:
        texts = {cid: documents.render(d, variant) for cid, d in docs.items()}
    texts_hash = content_key(sorted(texts.items()))[:16]
    key = index_key(subset, embedder, variant + key_suffix, store.name, texts_hash)
    t0 = time.perf_counter()

    def waiting() -> None:
        log.warning("index %s is being built by another process; waiting for it", key)

    with build_lock(lock_dir, key, on_wait=waiting):
        hit = store.open(key)
        if not hit:
            ids = list(texts)
            name = f"index {subset.name} ({getattr(embedder, 'name', 'embedder')}, {store.name})"
            with progress.stage(name, len(ids), "document") as bar:
                for start in range(0, len(ids), batch_size):
                    chunk = ids[start : start + batch_size]
                    vecs = embedder.embed_documents([texts[c] for c in chunk])
                    store.add(chunk, [texts[c] for c in chunk], np.asarray(vecs), [docs[c].metadata for c in chunk])
                    bar.advance(len(chunk))
                store.finalize()
    seconds = time.perf_counter() - t0
    if hit:
        log.info("index %s: reused (%d docs, %.2fs)", subset.name, len(texts), seconds)
    return Index(
        subset=subset,
        store=store,
        embedder=embedder,
        variant=variant,
        key=key,
        cache_hit=hit,
        build_seconds=seconds,
        docs=docs,
        texts=texts,
    )


def lexical_index(subset: Subset, variant: str) -> Index:
    """The index of a lexical-only method (``alpha=0``): the documents and their texts in the
    document variant, nothing embedded or stored; its BM25 indexes are built in memory on first
    use (``Index.lexical``)."""
    docs = {d.context_id: d for d in subset.corpus}
    texts = {cid: documents.render(d, variant) for cid, d in docs.items()}
    return Index(
        subset=subset,
        store=None,
        embedder=None,  # type: ignore[arg-type]
        variant=variant,
        key=f"{subset.name}_{variant}_lexical",
        cache_hit=False,
        build_seconds=0.0,
        docs=docs,
        texts=texts,
    )


def truncation_fraction(embedder: Embedder, texts: list[str]) -> float:
    """Share of documents longer than the embedder's max tokens (they are truncated when embedded)."""
    if not texts or not hasattr(embedder, "count_tokens"):
        return float("nan")
    counts = embedder.count_tokens(texts)
    return float(np.mean([c > embedder.max_tokens for c in counts]))
