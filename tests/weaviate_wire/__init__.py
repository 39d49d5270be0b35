"""A Weaviate stand-in that speaks Weaviate's real wire protocol on loopback, for the tests.

No Weaviate server can run on the development machines (no Docker engine; embedded Weaviate
downloads a server binary; no package ships one). ``WeaviateWire`` serves instead what t2exp's
``WeaviateStore`` uses, so that the store is exercised through the *unmodified* weaviate-client:
its REST calls over HTTP (``rest.py``: readiness, ``/v1/meta``, the schema endpoints) and its gRPC
calls (``grpc_service.py``: ``BatchObjects``, ``Search``, ``Aggregate`` and the health check),
the latter with the protocol definitions and servicer base class weaviate-client ships
(``weaviate.proto.v1``). Data and schema live in ``state.py``; every score is an exact numpy /
Python computation in ``scoring.py``. For the tests, ``WeaviateWire().db`` records every request
(``requests``), each search's kind, limit and arguments (``searches``), the Authorization headers
and metadata received (``authorization``) and what was refused as not modelled (``unmodelled``).

Semantics, and where each was taken from:

- Distances (``scoring.distances``): cosine = 1 - cosine similarity, dot = -dot product,
  l2-squared, manhattan -- https://docs.weaviate.io/weaviate/config-refs/distances . Vector search
  is exact (every object scored); HNSW is approximate, so a live server can differ where its
  recall is below 1.
- Tokenisation (``scoring.tokenize``): word = runs of letters and digits, lower-cased (so "_" and
  punctuation split); lowercase / whitespace / field --
  https://weaviate.io/developers/academy/py/tokenization/options and
  https://docs.weaviate.io/weaviate/config-refs/collections .
- BM25F (``scoring.bm25f``): k1 = 1.2, b = 0.75 by default, configurable per collection
  (https://docs.weaviate.io/weaviate/concepts/search/keyword-search ,
  https://docs.weaviate.io/weaviate/config-refs/indexing/inverted-index ); the exact formula --
  ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` times a repeated query term's count,
  ``tf = f / (f + k1 * (1 - b + b * len / avg_len))`` with no ``(k1 + 1)`` factor, summed over
  terms; a property without a searchable index is an error -- from Weaviate's source,
  ``adapters/repos/db/inverted/bm25_searcher.go`` (github.com/weaviate/weaviate).
- Hybrid (``grpc_service._hybrid``, ``scoring.*_fusion``): keyword weight ``1 - alpha``, vector
  weight ``alpha``; alpha = 0 runs the keyword search only, alpha = 1 the vector search only, an
  empty query has no keyword part; relativeScoreFusion (the default since 1.24) min-max normalises
  each result set (all equal: 1), vector results by similarity ``1 - distance``; rankedFusion
  scores ``weight / (rank + 60)`` with the rank counted from 0 --
  https://docs.weaviate.io/weaviate/concepts/search/hybrid-search ,
  https://weaviate.io/blog/hybrid-search-fusion-algorithms , and for the details (the 0-based
  rank, the all-equal case, ties within 1e-7 ordered by the original score, the keyword set
  first) ``usecases/traverser/hybrid/hybrid_fusion.go`` and ``searcher.go``. Each sub-search
  returns ``max(limit + offset, 100)`` results (``hybrid.DefaultLimit`` in
  ``usecases/traverser/explorer.go`` / ``explorer_hybrid.go``). From server version 1.36.6 the client sends alpha as
  ``alpha_param`` (proto3 cannot send 0.0 otherwise); both fields are read.
- Schema (``state.complete_class``): a created class comes back with the server defaults filled
  in (BM25 and stop-word settings, HNSW parameters, sharding / replication), class names
  capitalised, duplicate classes refused with 422; distance and index type and the properties
  are immutable on update -- https://docs.weaviate.io/weaviate/config-refs/collections and
  https://docs.weaviate.io/weaviate/config-refs/indexing/vector-index .
- Import (``state.Database.insert``): no auto-schema (an unknown property is a per-object error),
  a vector whose length differs from the index's is a per-object error with Weaviate's message
  ("new node has a vector with length 4. Existing nodes have vectors with length 8"), the same
  UUID again replaces the object. Errors go back per object in ``BatchObjectsReply.errors``, as
  Weaviate reports them (https://docs.weaviate.io/weaviate/manage-objects/import ).
- REST/gRPC surfaces: https://docs.weaviate.io/weaviate/api/rest and
  https://docs.weaviate.io/weaviate/api/grpc ; anonymous access (the OpenID probe answers 404).

Not modelled (refused with an error naming it, and recorded in ``Database.unmodelled``):
vectorizer modules and near_text, legacy (unnamed) class vectors, multi-target and multi-vectors,
filters, group-by, sort, autocut, cursors, offsets' interplay with autocut, generative and rerank
modules, property boosts (``text^2``), BM25 search operators, stop-word preset ``en`` (t2exp uses
``none``), trigram / gse / kagome tokenisation, multi-tenancy, references and nested objects,
object fetch by id, ``/v1/nodes`` (dynamic batching), backups, RBAC, authentication. Persistence
(a stand-in lives as long as its process), replication, async indexing and HNSW's approximation
are not modelled either: what passes here is verified at the wire level through the real client,
not against a live server.
"""

from .server import WeaviateWire

__all__ = ["WeaviateWire"]
