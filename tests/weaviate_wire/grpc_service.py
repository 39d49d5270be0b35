"""The stand-in's gRPC front end: ``weaviate.v1.Weaviate`` (the servicer base class weaviate-client
ships) and the ``grpc.health.v1.Health/Check`` probe the client sends on connect.

Implemented: ``BatchObjects`` (per-object errors in the reply, as Weaviate reports them),
``Aggregate`` (the total count only), ``Search`` with ``near_vector``, ``bm25_search`` or
``hybrid_search``, a limit and offset, the requested properties and metadata (uuid, distance,
score). Anything else in a request (filters, group-by, sort, autocut, generative, rerank, named
multi-target vectors...) is refused with INVALID_ARGUMENT naming what is not modelled, and recorded
in ``Database.unmodelled``; the other RPCs answer UNIMPLEMENTED (the base class).
"""

from __future__ import annotations

import time
import uuid as uuid_lib
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
from google.protobuf import json_format
from weaviate.proto.v1 import (
    aggregate_pb2,
    base_pb2,
    base_search_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

from . import scoring
from .state import Collection, Database, NotFound, SchemaError

HYBRID_SUBSEARCH_MIN = 100  # hybrid.DefaultLimit: each sub-search returns at least this many


class Unmodelled(Exception):
    """A request field the stand-in does not implement."""


def _vector(msg: Any) -> tuple[str | None, np.ndarray | None]:
    """(target vector name or None, the one query vector) of a NearVector / Hybrid / BatchObject message."""
    targets = list(getattr(msg, "target_vectors", []))
    if "targets" in msg.DESCRIPTOR.fields_by_name and msg.HasField("targets"):
        targets = list(msg.targets.target_vectors)
    if len(targets) > 1:
        raise Unmodelled("multi-target vector search")
    target = targets[0] if targets else None
    for vec in getattr(msg, "vectors", []):
        if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
            raise Unmodelled("multi-vectors")
        return (vec.name or target), np.frombuffer(vec.vector_bytes, dtype="<f4")
    for vft in getattr(msg, "vector_for_targets", []):
        name, vec = _vector(vft)
        return (vft.name or name or target), vec
    if getattr(msg, "vector_bytes", b""):
        return target, np.frombuffer(msg.vector_bytes, dtype="<f4")
    if len(getattr(msg, "vector", [])):
        return target, np.asarray(list(msg.vector), dtype=np.float32)
    return target, None


class WeaviateServicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, db: Database) -> None:
        self.db = db

    def _call(self, name: str, context: grpc.ServicerContext, fn: Callable[[], Any]) -> Any:
        with self.db.lock:
            self.db.requests.append(f"gRPC {name}")
            self.db.authorization += [str(v) for k, v in context.invocation_metadata() if k == "authorization"]
            try:
                return fn()
            except Unmodelled as exc:
                self.db.unmodelled.append(f"gRPC {name}: {exc}")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{exc} is not modelled by the Weaviate stand-in")
            except NotFound as exc:
                context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
            except SchemaError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    # -- import ---------------------------------------------------------------------------------

    def BatchObjects(self, request: batch_pb2.BatchObjectsRequest, context: grpc.ServicerContext) -> Any:
        return self._call("BatchObjects", context, lambda: self._batch(request))

    def _batch(self, request: batch_pb2.BatchObjectsRequest) -> batch_pb2.BatchObjectsReply:
        start = time.perf_counter()
        errors = []
        for i, obj in enumerate(request.objects):
            try:
                if obj.tenant:
                    raise Unmodelled("multi-tenancy")
                props = obj.properties
                if any(
                    len(getattr(props, f))
                    for f in (
                        "single_target_ref_props",
                        "multi_target_ref_props",
                        "number_array_properties",
                        "int_array_properties",
                        "text_array_properties",
                        "boolean_array_properties",
                        "object_properties",
                        "object_array_properties",
                    )
                ):
                    raise Unmodelled("array, object and reference properties")
                values = json_format.MessageToDict(props.non_ref_properties) if props.HasField("non_ref_properties") else {}
                name, vec = _vector(obj)
                vectors = {} if vec is None else {name or "": vec.tolist()}
                self.db.insert(obj.collection, obj.uuid, values, vectors)
            except (SchemaError, NotFound) as exc:
                errors.append(batch_pb2.BatchObjectsReply.BatchError(index=i, error=str(exc)))
        return batch_pb2.BatchObjectsReply(took=time.perf_counter() - start, errors=errors)

    def Aggregate(self, request: aggregate_pb2.AggregateRequest, context: grpc.ServicerContext) -> Any:
        def run() -> aggregate_pb2.AggregateReply:
            for f in ("group_by", "filters", "hybrid", "near_vector", "near_object", "near_text"):
                if request.HasField(f):
                    raise Unmodelled(f"Aggregate with {f}")
            if len(request.aggregations):
                raise Unmodelled("Aggregate over properties")
            col = self.db.get(request.collection)
            return aggregate_pb2.AggregateReply(single_result=aggregate_pb2.AggregateReply.Single(objects_count=len(col.objects)))

        return self._call("Aggregate", context, run)

    # -- search ---------------------------------------------------------------------------------

    def Search(self, request: search_get_pb2.SearchRequest, context: grpc.ServicerContext) -> Any:
        return self._call("Search", context, lambda: self._search(request))

    def _search(self, request: search_get_pb2.SearchRequest) -> search_get_pb2.SearchReply:
        start = time.perf_counter()
        for f in ("group_by", "filters", "near_object", "near_text", "generative", "rerank", "boost"):
            if request.HasField(f):
                raise Unmodelled(f"Search with {f}")
        if request.tenant or len(request.sort_by) or request.autocut or request.after:
            raise Unmodelled("Search with tenant, sort, autocut or cursor")
        col = self.db.get(request.collection)
        limit = request.limit or 10  # QUERY_DEFAULTS_LIMIT
        kinds = [f for f in ("near_vector", "bm25_search", "hybrid_search") if request.HasField(f)]
        if len(kinds) > 1:
            raise SchemaError(f"only one search operator at a time, got {kinds}")
        objs = list(col.objects.values())
        depth = request.offset + limit
        self.db.searches.append({"kind": kinds[0] if kinds else "fetch", "limit": limit, **self._arguments(request, kinds)})
        scored: scoring.Scored  # (object position, distance or score), best first
        field: str | None = None  # which metadata field the value goes to
        if not kinds:
            scored = [(i, 0.0) for i in range(len(objs))][:depth]
        elif kinds[0] == "near_vector":
            if request.near_vector.HasField("certainty") or request.near_vector.HasField("distance"):
                raise Unmodelled("near_vector certainty/distance thresholds")
            target, q = _vector(request.near_vector)
            scored = self._dense(col, objs, target, q)[:depth]
            field = "distance"
        elif kinds[0] == "bm25_search":
            bm = request.bm25_search
            if bm.HasField("search_operator"):
                raise Unmodelled("bm25 search operators")
            scored = self._bm25(col, objs, bm.query, list(bm.properties))[:depth]
            field = "score"
        else:
            scored = self._hybrid(col, objs, request.hybrid_search, depth)[:depth]
            field = "score"
        scored = scored[request.offset :]
        return search_get_pb2.SearchReply(
            took=time.perf_counter() - start, results=[self._result(col, objs[p], v, field, request) for p, v in scored]
        )

    @staticmethod
    def _arguments(request: search_get_pb2.SearchRequest, kinds: list[str]) -> dict[str, Any]:
        """What a test may check of a search: the query, properties, alpha, fusion type."""
        if kinds == ["bm25_search"]:
            return {"query": request.bm25_search.query, "properties": list(request.bm25_search.properties)}
        if kinds == ["hybrid_search"]:
            h = request.hybrid_search
            return {
                "query": h.query,
                "properties": list(h.properties),
                "alpha": h.alpha_param if h.use_alpha_param else h.alpha,
                "fusion": base_search_pb2.Hybrid.FusionType.Name(h.fusion_type),
            }
        return {}

    def _dense(self, col: Collection, objs: list, target: str | None, q: np.ndarray | None) -> scoring.Scored:
        if q is None:
            raise SchemaError("near_vector: no vector given")
        target, cfg = col.vector_config(target)
        rows = [(i, o.vectors[target]) for i, o in enumerate(objs) if target in o.vectors]
        if not rows:
            return []
        if len(rows[0][1]) != len(q):
            raise SchemaError(f"vector search: the query vector has length {len(q)}, the index holds vectors of length {len(rows[0][1])}")
        dist = scoring.distances(np.stack([v for _, v in rows]), q, cfg["vectorIndexConfig"]["distance"])
        order = sorted(range(len(rows)), key=lambda j: (dist[j], j))  # exact: HNSW's recall is 1 here
        return [(rows[j][0], float(dist[j])) for j in order]

    def _bm25(self, col: Collection, objs: list, query: str, properties: list[str]) -> scoring.Scored:
        if col.schema["invertedIndexConfig"]["stopwords"]["preset"] != "none":
            raise Unmodelled("BM25 with a stopword preset other than 'none'")
        if not properties:  # all searchable text properties
            properties = [p["name"] for p in col.schema["properties"] if p.get("indexSearchable") and "tokenization" in p]
        for name in properties:
            if "^" in name:
                raise Unmodelled("property boosts")
            prop = col.prop(name)
            if not prop.get("indexSearchable"):
                raise SchemaError(f"Property '{name}' is not searchable: it has no searchable inverted index")
        tok = {p: col.prop(p)["tokenization"] for p in properties}
        docs = [{p: scoring.tokenize(str(o.properties.get(p, "")), tok[p]) for p in properties} for o in objs]
        bm = col.schema["invertedIndexConfig"]["bm25"]
        scores = scoring.bm25f(query, docs, properties, tok, float(bm["k1"]), float(bm["b"]))
        hits = [(i, s) for i, s in enumerate(scores) if s > 0]
        return sorted(hits, key=lambda h: (-h[1], h[0]))

    def _hybrid(self, col: Collection, objs: list, h: base_search_pb2.Hybrid, depth: int) -> scoring.Scored:
        if h.HasField("near_text") or h.HasField("bm25_search_operator") or h.HasField("selection") or h.HasField("vector_distance"):
            raise Unmodelled("hybrid with near_text, a search operator, a selection or a distance cut-off")
        alpha = h.alpha_param if h.use_alpha_param else h.alpha
        if not 0.0 <= alpha <= 1.0:
            raise SchemaError(f"alpha must be between 0 and 1, got {alpha}")
        fusion = h.fusion_type or base_search_pb2.Hybrid.FUSION_TYPE_RELATIVE_SCORE  # the default since 1.24
        sub = max(depth, HYBRID_SUBSEARCH_MIN)
        sets: list[tuple[float, scoring.Scored]] = []
        if alpha < 1 and h.query:
            sets.append((1.0 - alpha, self._bm25(col, objs, h.query, list(h.properties))[:sub]))
        if alpha > 0:
            target, q = _vector(h.near_vector) if h.HasField("near_vector") else _vector(h)
            if q is None:
                raise SchemaError("hybrid: no vector given and the collection has no vectorizer")
            # the fusion works on similarities: 1 - distance
            sets.append((alpha, [(p, 1.0 - d) for p, d in self._dense(col, objs, target, q)[:sub]]))
        if fusion == base_search_pb2.Hybrid.FUSION_TYPE_RANKED:
            return scoring.ranked_fusion(sets)
        return scoring.relative_score_fusion(sets)

    @staticmethod
    def _result(col: Collection, obj: Any, value: float, field: str | None, request: search_get_pb2.SearchRequest) -> Any:
        meta = request.metadata
        md = search_get_pb2.MetadataResult()
        md.id = obj.uuid  # the client always reads the id
        md.id_as_bytes = uuid_lib.UUID(obj.uuid).bytes
        if meta.distance and field == "distance":
            md.distance, md.distance_present = value, True
        if meta.score and field == "score":
            md.score, md.score_present = value, True
        if meta.vector or len(meta.vectors):
            raise Unmodelled("returning vectors")
        # no properties request, or return_all_nonref_properties: every (non-reference) property
        wanted = [p["name"] for p in col.schema["properties"]]
        if request.HasField("properties") and not request.properties.return_all_nonref_properties:
            if len(request.properties.ref_properties) or len(request.properties.object_properties):
                raise Unmodelled("reference and object properties")
            wanted = list(request.properties.non_ref_properties)
        fields = {}
        for name in wanted:
            col.prop(name)
            if name in obj.properties:
                fields[name] = _value(obj.properties[name])
        props = search_get_pb2.PropertiesResult(non_ref_props=properties_pb2.Properties(fields=fields), target_collection=col.name)
        return search_get_pb2.SearchResult(properties=props, metadata=md)


def _value(v: Any) -> properties_pb2.Value:
    if isinstance(v, bool):
        return properties_pb2.Value(bool_value=v)
    if isinstance(v, int | float):
        return properties_pb2.Value(number_value=float(v))
    return properties_pb2.Value(text_value=str(v))


def health_handler() -> grpc.GenericRpcHandler:
    """``/grpc.health.v1.Health/Check``, with Weaviate's own request/response messages: SERVING."""

    def check(request: Any, context: grpc.ServicerContext) -> Any:
        return health_weaviate_pb2.WeaviateHealthCheckResponse(status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING)

    handler = grpc.unary_unary_rpc_method_handler(
        check,
        request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
        response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": handler})
