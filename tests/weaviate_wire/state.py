"""The stand-in's data: collections (their schema as Weaviate returns it) and their objects.

``Database`` is shared by the REST and gRPC front ends under one lock. Schema handling follows
Weaviate's: a created class is validated and completed with the server defaults (the JSON that
``GET /v1/schema/{name}`` returns), updates may not change what Weaviate calls immutable, and
objects are validated against the class (no auto-schema) when they are imported.
"""

from __future__ import annotations

import copy
import re
import threading
import uuid as uuid_lib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

VERSION = "1.40.3"  # the server version announced on /v1/meta (the image the README names)
CLASS_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]*$")
PROPERTY_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,230}$")
TOKENIZATIONS = ("word", "lowercase", "whitespace", "field")  # trigram, gse, kagome_*: not modelled
DISTANCES = ("cosine", "dot", "l2-squared", "manhattan")  # hamming: not modelled
DATA_TYPES = ("text", "text[]", "int", "number", "boolean", "date", "uuid")

HNSW_DEFAULTS: dict[str, Any] = {
    "skip": False,
    "cleanupIntervalSeconds": 300,
    "maxConnections": 32,
    "efConstruction": 128,
    "ef": -1,
    "dynamicEfMin": 100,
    "dynamicEfMax": 500,
    "dynamicEfFactor": 8,
    "vectorCacheMaxObjects": 1000000000000,
    "flatSearchCutoff": 40000,
    "distance": "cosine",
    "filterStrategy": "sweeping",
}
FLAT_DEFAULTS: dict[str, Any] = {"distance": "cosine", "vectorCacheMaxObjects": 1000000000000}
INVERTED_DEFAULTS: dict[str, Any] = {
    "bm25": {"b": 0.75, "k1": 1.2},
    "cleanupIntervalSeconds": 60,
    "stopwords": {"preset": "en", "additions": None, "removals": None},
    "indexTimestamps": False,
    "indexNullState": False,
    "indexPropertyLength": False,
    "usingBlockMaxWAND": True,
}
SHARDING_DEFAULTS: dict[str, Any] = {
    "virtualPerPhysical": 128,
    "desiredCount": 1,
    "actualCount": 1,
    "desiredVirtualCount": 128,
    "actualVirtualCount": 128,
    "key": "_id",
    "strategy": "hash",
    "function": "murmur3",
}


class SchemaError(Exception):
    """A request Weaviate answers with 422 and this message."""


class NotFound(Exception):
    """A request Weaviate answers with 404."""


@dataclass
class Obj:
    uuid: str
    properties: dict[str, Any]
    vectors: dict[str, np.ndarray]


@dataclass
class Collection:
    schema: dict[str, Any]
    objects: dict[str, Obj] = field(default_factory=dict)  # insertion order = Weaviate's doc ids

    @property
    def name(self) -> str:
        return str(self.schema["class"])

    def prop(self, name: str) -> dict[str, Any]:
        for p in self.schema["properties"]:
            if p["name"] == name:
                return p
        raise SchemaError(f"no such prop with name '{name}' found in class '{self.name}' in the schema")

    def vector_config(self, target: str | None) -> tuple[str, dict[str, Any]]:
        named = self.schema.get("vectorConfig") or {}
        if target is None:
            if len(named) != 1:
                raise SchemaError(f"class {self.name} has multiple vectors, but no target vectors were provided")
            target = next(iter(named))
        if target not in named:
            raise SchemaError(f"class {self.name} does not have named vector {target} configured")
        return target, named[target]


def _merge(defaults: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    for key, value in (given or {}).items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def complete_class(raw: dict[str, Any]) -> dict[str, Any]:
    """The class as Weaviate stores it: validated, server defaults filled in, client-only keys dropped."""
    name = str(raw.get("class") or "")
    name = name[:1].upper() + name[1:]
    if not CLASS_NAME.match(name):
        raise SchemaError(f"'{name}' is not a valid class name")
    if "vectorConfig" not in raw or not raw["vectorConfig"]:
        raise SchemaError("the stand-in models named vectors (vectorConfig) only; a legacy class vectorizer is not modelled")
    out: dict[str, Any] = {"class": name, "description": raw.get("description") or ""}
    out["invertedIndexConfig"] = _merge(INVERTED_DEFAULTS, raw.get("invertedIndexConfig"))
    preset = out["invertedIndexConfig"]["stopwords"]["preset"]
    if preset not in ("en", "none"):
        raise SchemaError(f"stopwords preset '{preset}' is not known")
    out["multiTenancyConfig"] = _merge(
        {"enabled": False, "autoTenantCreation": False, "autoTenantActivation": False}, raw.get("multiTenancyConfig")
    )
    if out["multiTenancyConfig"]["enabled"]:
        raise SchemaError("multi-tenancy is not modelled by the stand-in")
    out["replicationConfig"] = _merge(
        {"factor": 1, "asyncEnabled": False, "deletionStrategy": "NoAutomatedResolution"}, raw.get("replicationConfig")
    )
    out["shardingConfig"] = _merge(SHARDING_DEFAULTS, raw.get("shardingConfig"))
    out["vectorConfig"] = {}
    for vname, cfg in raw["vectorConfig"].items():
        vectorizer = cfg.get("vectorizer") or {"none": {}}
        if list(vectorizer) != ["none"]:
            raise SchemaError(f"vectorizer {list(vectorizer)} is not modelled by the stand-in (only self-provided vectors)")
        index_type = cfg.get("vectorIndexType") or "hnsw"
        if index_type not in ("hnsw", "flat"):
            raise SchemaError(f"vector index type '{index_type}' is not modelled by the stand-in")
        index = _merge(HNSW_DEFAULTS if index_type == "hnsw" else FLAT_DEFAULTS, cfg.get("vectorIndexConfig"))
        if index["distance"] not in DISTANCES:
            raise SchemaError(f"invalid distance metric '{index['distance']}'")
        out["vectorConfig"][vname] = {"vectorizer": {"none": {}}, "vectorIndexType": index_type, "vectorIndexConfig": index}
    out["properties"] = [_complete_property(p) for p in raw.get("properties") or []]
    names = [p["name"] for p in out["properties"]]
    if len(set(names)) != len(names):
        raise SchemaError(f"class '{name}' has duplicate property names")
    return out


def _complete_property(raw: dict[str, Any]) -> dict[str, Any]:
    name = str(raw.get("name") or "")
    if not PROPERTY_NAME.match(name):
        raise SchemaError(f"'{name}' is not a valid property name")
    data_type = list(raw.get("dataType") or [])
    if len(data_type) != 1 or data_type[0] not in DATA_TYPES:
        raise SchemaError(f"property '{name}': data type {data_type} is not modelled by the stand-in")
    text = data_type[0] in ("text", "text[]")
    prop: dict[str, Any] = {
        "name": name,
        "dataType": data_type,
        "description": raw.get("description", ""),
        "indexFilterable": raw.get("indexFilterable", True),
        "indexSearchable": raw.get("indexSearchable", text),
        "indexRangeFilters": raw.get("indexRangeFilters", False),
    }
    tokenization = raw.get("tokenization")
    if text:
        tokenization = tokenization or "word"
        if tokenization not in TOKENIZATIONS:
            raise SchemaError(f"property '{name}': tokenization '{tokenization}' is not modelled by the stand-in")
        prop["tokenization"] = tokenization
    elif tokenization:
        raise SchemaError(f"Tokenization is not allowed for data type '{data_type[0]}'")
    elif prop["indexSearchable"]:
        raise SchemaError(f"`indexSearchable` is not allowed for other than text/text[] data types (property '{name}')")
    return prop


def check_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Weaviate refuses to change the properties and a vector's index type or distance in place."""

    def shape(s: dict[str, Any]) -> list[tuple]:
        return [(p["name"], tuple(p["dataType"]), p.get("tokenization"), p["indexSearchable"]) for p in s["properties"]]

    if shape(old) != shape(new):
        raise SchemaError("properties cannot be updated through updating the class. Use the add property feature")
    for vname, cfg in old["vectorConfig"].items():
        other = new["vectorConfig"].get(vname)
        if other is None or other["vectorIndexType"] != cfg["vectorIndexType"]:
            raise SchemaError(f"vector index type of vector '{vname}' is immutable")
        if other["vectorIndexConfig"]["distance"] != cfg["vectorIndexConfig"]["distance"]:
            raise SchemaError(f"vector '{vname}': distance is immutable")


class Database:
    """All collections of the stand-in; every access holds ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.collections: dict[str, Collection] = {}
        self.requests: list[str] = []  # "REST GET /v1/meta", "gRPC Search", ... in arrival order
        self.unmodelled: list[str] = []  # requests the stand-in does not implement (answered with an error)
        self.searches: list[dict[str, Any]] = []  # per gRPC Search: kind, limit, and the kind's arguments
        self.authorization: list[str] = []  # Authorization headers / metadata received (REST and gRPC)

    def get(self, name: str) -> Collection:
        col = self.collections.get(name[:1].upper() + name[1:])
        if col is None:
            raise NotFound(f"collection {name} not found")
        return col

    def create(self, raw: dict[str, Any]) -> dict[str, Any]:
        schema = complete_class(raw)
        if schema["class"] in self.collections:
            raise SchemaError(f"class name {schema['class']} already exists")
        self.collections[schema["class"]] = Collection(schema)
        return schema

    def update(self, name: str, raw: dict[str, Any]) -> dict[str, Any]:
        col = self.get(name)
        schema = complete_class(raw)
        if schema["class"] != col.name:
            raise SchemaError(f"class name is immutable: attempted change from '{col.name}' to '{schema['class']}'")
        check_update(col.schema, schema)
        col.schema = schema
        return schema

    def delete(self, name: str) -> None:
        self.collections.pop(name[:1].upper() + name[1:], None)  # deleting a missing class is a 200 in Weaviate

    def insert(self, name: str, uid: str, properties: dict[str, Any], vectors: dict[str, list[float]]) -> None:
        """One object of a batch; raises ``SchemaError`` with Weaviate's message for a bad one."""
        col = self.get(name)
        uid = str(uuid_lib.UUID(uid)) if uid else str(uuid_lib.uuid4())
        for key, value in properties.items():
            prop = col.prop(key)
            kind = prop["dataType"][0]
            if kind == "text" and not isinstance(value, str):
                raise SchemaError(f"invalid text property '{key}' on class '{col.name}': not a string, but {type(value).__name__}")
        stored: dict[str, np.ndarray] = {}
        for vname, values in vectors.items():
            target, _ = col.vector_config(vname or None)
            vec = np.asarray(values, dtype=np.float32)
            have = next((o.vectors[target] for o in col.objects.values() if target in o.vectors and o.uuid != uid), None)
            if have is not None and len(have) != len(vec):
                raise SchemaError(
                    f"insert to vector index: new node has a vector with length {len(vec)}. "
                    f"Existing nodes have vectors with length {len(have)}"
                )
            stored[target] = vec
        col.objects.pop(uid, None)  # the same uuid again: the object is replaced (and gets a new doc id)
        col.objects[uid] = Obj(uid, dict(properties), stored)
