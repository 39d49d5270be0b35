"""Config validation before any work starts: one line naming the key, the value and what is allowed."""

from __future__ import annotations

import importlib.util
import os

from omegaconf import DictConfig

from t2exp.answers import MODES
from t2exp.data import SUBSETS
from t2exp.documents import VARIANTS
from t2exp.errors import ConfigError
from t2exp.fusion import FUSIONS

API_KEY_ENVS = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "cohere": ("CO_API_KEY",),
}


def _require(cond: bool, key: str, value: object, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"{key}={value!r} is invalid; allowed: {allowed}")


def validate(cfg: DictConfig) -> None:
    k = cfg.get("k")
    _require(isinstance(k, int) and not isinstance(k, bool) and k >= 1, "k", k, "an integer >= 1")
    ds = cfg.dataset
    subsets = list(ds.get("subsets") or [])
    _require(bool(subsets), "dataset.subsets", subsets, f"a non-empty list of {', '.join(SUBSETS)}")
    for s in subsets:
        _require(s in SUBSETS, "dataset.subsets", s, ", ".join(SUBSETS))
    _require(ds.get("source") in ("auto", "local", "hub"), "dataset.source", ds.get("source"), "auto, local, hub")
    limit = ds.get("limit")
    _require(limit is None or (isinstance(limit, int) and limit >= 1), "dataset.limit", limit, "null or an integer >= 1")
    _require(cfg.document.variant in VARIANTS, "document.variant", cfg.document.variant, ", ".join(VARIANTS))

    rm = cfg.rag_method
    if "alpha" in rm:
        a = rm.alpha
        _require(isinstance(a, (int, float)) and 0.0 <= float(a) <= 1.0, "rag_method.alpha", a, "a number in [0, 1] (1 = dense, 0 = BM25)")
    if "fusion" in rm:
        _require(rm.fusion in FUSIONS, "rag_method.fusion", rm.fusion, ", ".join(FUSIONS))
    if "candidates" in rm and rm.candidates is not None:
        _require(int(rm.candidates) >= k, "rag_method.candidates", rm.candidates, f"an integer >= k ({k})")

    gen = cfg.generator
    if gen.get("_target_"):
        mode = gen.get("answer_mode", "direct")
        _require(mode in MODES, "generator.answer_mode", mode, ", ".join(MODES))
        mt = gen.get("sampling", {}).get("max_tokens", 1)
        _require(isinstance(mt, int) and mt >= 1, "generator.sampling.max_tokens", mt, "an integer >= 1")
        if gen.get("backend") == "vllm" and importlib.util.find_spec("vllm") is None:
            raise ConfigError("generator.backend='vllm' needs the vllm package; install t2exp[vllm] (GPU machines) or use generator.backend=openai")
    for group in ("embedder", "generator", "reranker"):
        comp = cfg.get(group)
        if comp is None:
            continue
        provider = comp.get("provider")
        if provider in API_KEY_ENVS and not comp.get("api_key"):
            envs = API_KEY_ENVS[provider]
            if not any(os.environ.get(e) for e in envs):
                raise ConfigError(f"{group}={comp.get('name')} needs an API key: set {' or '.join(envs)} (or {group}.api_key)")
