"""One config, several backends (``_target_: t2exp.generators.factory.make_generator``): a model config
holds every backend's settings and ``backend`` picks ``openai`` (:class:`~t2exp.generators.openai_compat.OpenAICompatGenerator`),
``vllm`` (:class:`~t2exp.generators.vllm_backend.VLLMGenerator`) or ``vllm_server``
(:class:`~t2exp.generators.vllm_server.VLLMServerGenerator`). Another backend's keys are dropped; a
key no backend takes is a ``ConfigError``.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from t2exp.errors import ConfigError
from t2exp.generators import Generator
from t2exp.generators.openai_compat import OpenAICompatGenerator
from t2exp.generators.vllm_backend import VLLMGenerator
from t2exp.generators.vllm_server import VLLMServerGenerator

log = logging.getLogger(__name__)

BACKENDS: dict[str, type] = {
    "openai": OpenAICompatGenerator,
    "vllm": VLLMGenerator,
    "vllm_server": VLLMServerGenerator,
}


def accepted_keys(cls: type[Any]) -> set[str]:
    params = inspect.signature(cls.__init__).parameters
    return {n for n, p in params.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def make_generator(backend: str = "openai", **kwargs: Any) -> Generator:
    cls = BACKENDS[backend]  # the config schema allows only these (t2exp.config.generators.ServedModelConfig)
    known = set().union(*(accepted_keys(c) for c in BACKENDS.values()))
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ConfigError(f"generator.{unknown[0]} is not a setting of any generator backend ({', '.join(BACKENDS)}); check the spelling")
    takes = accepted_keys(cls)
    dropped = sorted(k for k in kwargs if k not in takes)
    if dropped:
        log.debug("generator backend %s ignores %s", backend, ", ".join(dropped))
    return cls(**{k: v for k, v in kwargs.items() if k in takes})
