"""Production store: Weaviate (server) through weaviate-client v4, imported lazily.

One collection per index key, our own vectors, cosine HNSW. Dense is ``near_vector`` (1 - cosine
distance), BM25 Weaviate's keyword search over ``text``, hybrid either Weaviate's ``query.hybrid``
(``native_hybrid=true``) or ``t2exp.index.fusion.fuse`` over both candidate lists as in
``LanceDBStore``; ``alpha`` 1 / 0 are exactly ``dense()`` / ``bm25()``. The two hybrids agree on
corpora of at most ``candidate_depth`` objects (Weaviate's sub-searches take at least 100 and its
rankedFusion counts ranks from 0). No batched queries: one request per query.

A build is complete when ``finalize()`` wrote ``t2exp:complete rows=N`` into the collection's
description and it still holds N objects (reused as is); anything else is dropped and rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2exp.errors import ConfigError, RemoteError, one_line
from t2exp.index.fusion import fuse
from t2exp.index.store import Hits
from t2exp.infra.redaction import register_secret
from t2exp.stores.weaviate_embedded import embedded_options

log = logging.getLogger(__name__)

CONNECTIONS = ("local", "custom", "cloud", "embedded")
_BUILDING = "t2exp:building"
_COMPLETE = "t2exp:complete rows={}"
_DOCKER = "docker run -d -p {http}:8080 -p {grpc}:50051 cr.weaviate.io/semitechnologies/weaviate:1.40.3"


def collection_name(key: str) -> str:
    """A valid Weaviate class name for ``key``: ``T2exp_<sanitised key>_<hash>``.

    Starts uppercase, only ``[A-Za-z0-9_]``; the hash of the raw key keeps two keys that
    sanitise alike (or are truncated alike) apart.
    """
    clean = re.sub(r"[^A-Za-z0-9_]", "_", key)[:100]
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]
    return f"T2exp_{clean}_{digest}"


class WeaviateStore:
    name = "weaviate"

    def __init__(
        self,
        connection: str = "local",
        host: str = "localhost",
        http_port: int = 8080,
        grpc_port: int = 50051,
        http_secure: bool = False,
        grpc_secure: bool = False,
        grpc_host: str | None = None,
        cluster_url: str | None = None,
        api_key_env: str | None = "WEAVIATE_API_KEY",
        batch_size: int = 200,
        candidate_depth: int = 50,
        native_hybrid: bool = True,
        binary: str | None = None,
        embedded_dir: str | None = None,
    ) -> None:
        self.connection = connection
        self.host = host
        self.http_port = int(http_port)
        self.grpc_port = int(grpc_port)
        self.http_secure = bool(http_secure)
        self.grpc_secure = bool(grpc_secure)
        self.grpc_host = grpc_host or host
        self.cluster_url = cluster_url
        self.api_key_env = api_key_env
        self.batch_size = int(batch_size)
        self.candidate_depth = int(candidate_depth)
        self.native_hybrid = bool(native_hybrid)
        self.binary, self.embedded_dir = binary, embedded_dir  # connection=embedded (t2exp.stores.weaviate_embedded)
        self.collection_name: str | None = None
        self.collection: Any = None
        self.inserted = 0
        self.client: Any = self._connect()

    # -- connection -------------------------------------------------------------------------

    def _where(self) -> str:
        if self.connection == "cloud":
            return f"cluster_url={self.cluster_url}"
        if self.connection == "embedded":
            return f"embedded server {self.binary} on {self.host} http_port={self.http_port} grpc_port={self.grpc_port}"
        return f"host={self.host} http_port={self.http_port} grpc_host={self.grpc_host} grpc_port={self.grpc_port}"

    def _connect(self) -> Any:
        try:
            import weaviate
            from weaviate.classes.init import Auth
            from weaviate.exceptions import WeaviateBaseError
        except ImportError as exc:
            raise ConfigError(f"store=weaviate needs weaviate-client: pip install 't2exp[weaviate]' ({exc})") from None
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        register_secret(key)
        auth = Auth.api_key(key) if key else None
        try:
            if self.connection == "local":
                return weaviate.connect_to_local(host=self.host, port=self.http_port, grpc_port=self.grpc_port, auth_credentials=auth)
            if self.connection == "custom":
                return weaviate.connect_to_custom(
                    http_host=self.host,
                    http_port=self.http_port,
                    http_secure=self.http_secure,
                    grpc_host=self.grpc_host,
                    grpc_port=self.grpc_port,
                    grpc_secure=self.grpc_secure,
                    auth_credentials=auth,
                )
            if self.connection == "embedded":  # every field of the options, under connect_to_embedded's names
                options = embedded_options(str(self.binary), str(self.embedded_dir), self.host, self.http_port, self.grpc_port)
                args = dataclasses.asdict(options)
                env = args.pop("additional_env_vars")
                return weaviate.connect_to_embedded(**args, environment_variables=env)
            # connection=cloud: the config checks require cluster_url and a set api_key_env (t2exp.config)
            return weaviate.connect_to_weaviate_cloud(cluster_url=self.cluster_url, auth_credentials=auth)  # type: ignore[arg-type]
        except (WeaviateBaseError, OSError) as exc:
            detail = one_line(exc, 300)
            fix = f"start a server with `{_DOCKER.format(http=self.http_port, grpc=self.grpc_port)}`"
            if self.connection == "embedded":
                fix = "check store.binary (a Weaviate server binary or its tarball's URL) and that the two ports are free"
            raise RemoteError(
                f"store=weaviate: cannot connect ({self._where()}): {detail} -- {fix} "
                "or point store.host/http_port/grpc_port at a running one"
            ) from None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> WeaviateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- build ------------------------------------------------------------------------------

    def _stored_count(self) -> int:
        total = self.collection.aggregate.over_all(total_count=True).total_count
        return int(total or 0)

    def open(self, key: str) -> bool:
        from weaviate.classes.config import Configure, DataType, Property, StopwordsPreset, Tokenization, VectorDistances

        self.collection_name = collection_name(key)
        collections = self.client.collections
        if collections.exists(self.collection_name):
            self.collection = collections.get(self.collection_name)
            description = self.collection.config.get().description or ""
            if description == _COMPLETE.format(self._stored_count()):
                return True
            log.warning("weaviate: dropping incomplete collection %s (%r)", self.collection_name, description)
            collections.delete(self.collection_name)
        self.collection = collections.create(
            self.collection_name,
            description=_BUILDING,
            vector_config=Configure.Vectors.self_provided(
                vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)
            ),
            # no stop-word removal, like LanceDBStore's FTS index (remove_stop_words=False)
            inverted_index_config=Configure.inverted_index(stopwords_preset=StopwordsPreset.NONE),
            properties=[
                Property(name="context_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False),
                Property(name="text", data_type=DataType.TEXT, tokenization=Tokenization.WORD, index_searchable=True),
                Property(name="metadata", data_type=DataType.TEXT, index_filterable=False, index_searchable=False),
            ],
        )
        return False

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, metadata: Sequence[dict]) -> None:
        """Import in requests of ``batch_size`` objects, each one synchronous gRPC batch call
        (``insert_many``; the client's own batcher polls from a thread and cost about a second a
        call whatever its size); objects the server refuses are counted and the first one's
        message raised as one line."""
        from weaviate.classes.data import DataObject
        from weaviate.exceptions import WeaviateInsertManyAllFailedError
        from weaviate.util import generate_uuid5

        vectors = np.asarray(vectors, dtype=np.float32)
        objects = [
            DataObject(
                properties={"context_id": cid, "text": text, "metadata": json.dumps(meta, sort_keys=True)},
                uuid=generate_uuid5(cid),
                vector=vec.tolist(),
            )
            for cid, text, vec, meta in zip(ids, texts, vectors, metadata, strict=False)
        ]
        failed: list[str] = []  # one message per refused object
        for start in range(0, len(objects), self.batch_size):
            chunk = objects[start : start + self.batch_size]
            try:
                errors = self.collection.data.insert_many(chunk).errors
            except WeaviateInsertManyAllFailedError as exc:
                failed += [str(exc)] * len(chunk)
                continue
            failed += [errors[i].message for i in sorted(errors)]
        if failed:
            raise RemoteError(
                f"store=weaviate: {len(failed)} of {len(ids)} objects failed to import into {self.collection_name}; "
                f"first: {one_line(failed[0], 300)}"
            )
        self.inserted += len(ids)

    def finalize(self) -> None:
        rows = self._stored_count()
        if rows != self.inserted:
            log.warning(
                "weaviate: %s holds %d objects after %d inserts (duplicate context ids?)", self.collection_name, rows, self.inserted
            )
        self.collection.config.update(description=_COMPLETE.format(rows))

    def count(self) -> int:
        return 0 if self.collection is None else self._stored_count()

    # -- queries ----------------------------------------------------------------------------

    @staticmethod
    def _hits(objects: Sequence[Any], score: Any) -> Hits:
        return [(str(o.properties["context_id"]), float(score(o.metadata))) for o in objects]

    def dense(self, query_vectors: np.ndarray, k: int) -> list[Hits]:
        from weaviate.classes.query import MetadataQuery

        out = []
        for v in np.asarray(query_vectors, dtype=np.float32):
            res = self.collection.query.near_vector(
                near_vector=v.tolist(),
                limit=max(k, 1),
                return_metadata=MetadataQuery(distance=True),
                return_properties=["context_id"],
            )
            out.append(self._hits(res.objects, lambda m: 1.0 - m.distance))
        return out

    def bm25(self, queries: Sequence[str], k: int) -> list[Hits]:
        return [self._scored(self.collection.query.bm25, k, query=q) if q.strip() else [] for q in queries]

    def _scored(self, search: Any, k: int, **query: Any) -> Hits:
        """One keyword (or hybrid) query over the text: its top ``k`` by Weaviate's score."""
        from weaviate.classes.query import MetadataQuery

        res = search(
            query_properties=["text"], limit=max(k, 1), return_metadata=MetadataQuery(score=True), return_properties=["context_id"], **query
        )
        return self._hits(res.objects, lambda m: m.score)

    def hybrid(self, queries: Sequence[str], query_vectors: np.ndarray, k: int, alpha: float, fusion: str = "relative_score") -> list[Hits]:
        # the extremes are exactly one search, in both modes (as in t2exp.index.fusion.fuse)
        if alpha == 1.0:
            return self.dense(query_vectors, k)
        if alpha == 0.0:
            return self.bm25(queries, k)
        if not self.native_hybrid or fusion == "paper_rank":  # Weaviate has relativeScore and ranked only
            depth = max(k, self.candidate_depth)
            dense, lexical = self.dense(query_vectors, depth), self.bm25(queries, depth)
            return [fuse(d, s, k, alpha, fusion) for d, s in zip(dense, lexical, strict=False)]

        from weaviate.classes.query import HybridFusion

        fusion_type = HybridFusion.RELATIVE_SCORE if fusion == "relative_score" else HybridFusion.RANKED
        out = []
        for q, v in zip(queries, np.asarray(query_vectors, dtype=np.float32), strict=False):
            if not q.strip():  # no keyword part: what fuse() gives for an empty BM25 list
                out.append(self.dense(v[None, :], k)[0])
                continue
            out.append(
                self._scored(self.collection.query.hybrid, k, query=q, vector=v.tolist(), alpha=float(alpha), fusion_type=fusion_type)
            )
        return out
