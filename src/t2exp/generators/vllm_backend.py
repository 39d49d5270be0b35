"""In-process vLLM: every prompt of a ``generate`` call goes to ``LLM.chat`` as one batch.

``vllm`` is an optional extra for GPU machines (``pip install t2exp[vllm]``) and is imported on
first use only. The engine is kept per process and reused by later generators with the same
settings (sequential Hydra multirun jobs do not reload a 70B model); a generator with other
settings drops the previous engine first, since one GPU rarely holds two.
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import logging
import threading
import time
from typing import Any

from t2exp.errors import ConfigError
from t2exp.generators import Generation, Messages, OnResult, Sampling, ShouldStop
from t2exp.generators.openai_compat import reasoning_generation
from t2exp.infra.cache import content_key
from t2exp.text.reasoning import split_reasoning

log = logging.getLogger(__name__)

INSTALL_HINT = "install t2exp[vllm] (GPU machines) or use generator.backend=openai with a running server"

_ENGINE_LOCK = threading.Lock()
_ENGINE: tuple[tuple, Any] | None = None  # (settings key, vllm.LLM)


def _shutdown(llm: Any) -> None:
    """Stop an engine's background processes (vLLM V1: the engine core and its workers).

    Needed at exit: multiprocessing's exit hook joins those non-daemon children, and when it runs
    before vLLM's own finalizer (an order that depends on import order) the process never exits."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    stop = getattr(core, "shutdown", None)
    if stop is None:
        return
    try:
        stop()
    except Exception as exc:  # best effort at exit
        log.warning("vLLM engine shutdown failed: %s", exc)


def shutdown_engine() -> None:
    """Drop the process's engine (registered with atexit after multiprocessing's hook, so it runs first)."""
    global _ENGINE
    with _ENGINE_LOCK:
        engine, _ENGINE = _ENGINE, None
    if engine is not None:
        _shutdown(engine[1])
        gc.collect()


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def vllm_fingerprint(model: str, quantization: str | None, dtype: str, reasoning: bool) -> str:
    """Shared by the in-process and the server backend: same weights, same outputs."""
    return content_key("vllm", model, quantization, dtype, bool(reasoning))[:16]


def _structured_output(schema: dict | None) -> dict[str, Any]:
    """vLLM's guided decoding for a JSON schema: ``structured_outputs`` (vLLM >= 0.10.2), else the
    older ``guided_decoding``."""
    if schema is None:
        return {}
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


class VLLMGenerator:
    def __init__(
        self,
        name: str,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = 16384,
        gpu_memory_utilization: float = 0.9,
        quantization: str | None = None,
        dtype: str = "auto",
        reasoning: bool = False,
        seed: int = 0,
        enforce_eager: bool = False,
        batch_size: int = 64,
    ) -> None:
        if not vllm_available():
            raise ConfigError(f"generator={name}: backend vllm needs the vllm package; {INSTALL_HINT}")
        if not model:
            raise ConfigError(f"generator={name}: generator.model is empty; set a Hugging Face id or a local path")
        self.name = name
        self.model = model
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.gpus = self.tensor_parallel_size  # what a cell's gpu_seconds counts
        self.max_model_len = int(max_model_len) if max_model_len else None
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.quantization = quantization
        self.dtype = dtype
        self.reasoning = bool(reasoning)
        self.seed = int(seed)
        self.enforce_eager = bool(enforce_eager)
        self.batch_size = int(batch_size)

    @property
    def fingerprint(self) -> str:
        return vllm_fingerprint(self.model, self.quantization, self.dtype, self.reasoning)

    def engine_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "dtype": self.dtype,
            "seed": self.seed,
            "enforce_eager": self.enforce_eager,
        }
        if self.max_model_len:
            kw["max_model_len"] = self.max_model_len
        if self.quantization:
            kw["quantization"] = self.quantization
        return kw

    def _llm(self) -> Any:
        global _ENGINE
        kw = self.engine_kwargs()
        key = tuple(sorted(kw.items()))
        with _ENGINE_LOCK:
            if _ENGINE is not None and _ENGINE[0] == key:
                return _ENGINE[1]
            try:
                from vllm import LLM
            except ImportError as exc:
                raise ConfigError(f"generator={self.name}: cannot import vllm ({exc}); {INSTALL_HINT}") from None
            if _ENGINE is not None:
                log.info("dropping the vLLM engine for %s to load %s", dict(_ENGINE[0]).get("model"), self.model)
                old, _ENGINE = _ENGINE[1], None
                _shutdown(old)
                del old
                gc.collect()
            t0 = time.perf_counter()
            llm = LLM(**kw)
            log.info("vLLM loaded %s in %.1fs", self.model, time.perf_counter() - t0)
            _ENGINE = (key, llm)
            atexit.unregister(shutdown_engine)  # once, and after the hooks vllm's imports registered: runs before them
            atexit.register(shutdown_engine)
            return llm

    def _count_tokens(self, llm: Any, text: str) -> int:
        if not text:
            return 0
        try:
            return len(llm.get_tokenizer().encode(text, add_special_tokens=False))
        except Exception:  # an estimate is fine when the tokenizer is unusual
            return len(text.split())

    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        """One engine batch: ``should_stop`` is not consulted inside it (vLLM schedules the whole
        batch at once); the next batch is where a stopping run stops."""
        if not prompts:
            return []
        from vllm import SamplingParams

        llm = self._llm()
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=sampling.seed,
            stop=list(sampling.stop) or None,
            **_structured_output(sampling.json_schema),
        )
        t0 = time.perf_counter()
        outputs = llm.chat(prompts, params, use_tqdm=False)
        drawn: list[list[str]] = [[] for _ in prompts]
        if sampling.samples > 1:  # the engine's prefix cache serves the prompts' prefill again
            more = SamplingParams(
                n=sampling.samples - 1,
                temperature=sampling.sample_temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                seed=sampling.seed + 1,
                stop=list(sampling.stop) or None,
                **_structured_output(sampling.json_schema),
            )
            drawn = [[o.text for o in out.outputs] for out in llm.chat(prompts, more, use_tqdm=False)]
        per_prompt = (time.perf_counter() - t0) / len(prompts)
        gens: list[Generation] = []
        for i, out in enumerate(outputs):  # one engine batch: every answer is complete here
            best = out.outputs[0]
            gen = Generation(
                text=best.text,
                prompt_tokens=len(out.prompt_token_ids or ()),
                completion_tokens=len(best.token_ids or ()),
                seconds=per_prompt,
                finish_reason=str(best.finish_reason or "stop"),
                extra={"samples": drawn[i]} if drawn[i] else {},
            )
            if self.reasoning:
                _, thought = split_reasoning(best.text)
                reasoning_generation(gen, self._count_tokens(llm, thought))
            gens.append(gen)
            if on_result is not None:
                on_result(i, gen)
        return gens
