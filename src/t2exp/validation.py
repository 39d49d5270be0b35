"""Config validation before any work starts: one line naming the key, the value and what is allowed.

``validate`` is called first in ``app.run`` and, for the command line, by the pre-flight check in
``t2exp.__main__`` before Hydra creates its output directory, so a bad value stops the command
with nothing written. Checks that need the components themselves (a model that does not load, a
server that does not answer) happen when they are built.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

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
GENERATOR_BACKENDS = ("openai", "vllm", "vllm_server")
LEXICAL = ("bm25s", "store")
FIRST_STAGES = ("base", "hybrid")
_OPENAI_COMPAT = "t2exp.generators.openai_compat.OpenAICompatGenerator"
_FACTORY = "t2exp.generators.factory.make_generator"
VLLM_HINT = "install t2exp[vllm] (GPU machines)"


def _vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def _require(cond: bool, key: str, value: object, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"{key}={value!r} is invalid; allowed: {allowed}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int_at_least(node: Any, key: str, prefix: str, lo: int) -> None:
    if node is not None and key in node and node.get(key) is not None:
        v = node.get(key)
        _require(_is_int(v) and v >= lo, f"{prefix}.{key}", v, f"an integer >= {lo}")


def _options(group: str) -> str:
    """The options of a config group, for messages (``minilm, e5, ...``)."""
    from t2exp.paths import CONF_DIR

    names = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    return ", ".join(names) if names else f"see conf/{group}/"


def validate(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` (one line: key, bad value, allowed values) on the first bad setting."""
    try:
        _validate(cfg)
    except OmegaConfBaseException as exc:  # e.g. ${oc.env:X} with X unset
        key = getattr(exc, "full_key", None) or _unresolvable_key(cfg) or "config"
        msg = " ".join(str(exc).split("\n")[0].split())
        raise ConfigError(f"{key}: cannot resolve its value ({msg[:200]})") from None


def _unresolvable_key(node: Any, prefix: str = "") -> str | None:
    """The first key (outside ``hydra``) whose value does not resolve."""
    if not OmegaConf.is_config(node):
        return None
    keys = range(len(node)) if OmegaConf.is_list(node) else [k for k in node.keys() if not (prefix == "" and k == "hydra")]
    for k in keys:
        try:
            child = node[k]
        except OmegaConfBaseException:
            return f"{prefix}{k}"
        found = _unresolvable_key(child, f"{prefix}{k}.")
        if found:
            return found
    return None


def _validate(cfg: DictConfig) -> None:
    k = cfg.get("k")
    _require(_is_int(k) and k >= 1, "k", k, "an integer >= 1")
    seed = cfg.get("seed")
    _require(_is_int(seed), "seed", seed, "an integer")
    _validate_dataset(cfg.dataset)
    _require(cfg.document.variant in VARIANTS, "document.variant", cfg.document.variant, ", ".join(VARIANTS))
    _validate_rag_method(cfg, k)
    _validate_generator(cfg.get("generator"))
    emb = cfg.get("embedder")
    for key in ("batch_size", "max_tokens", "dim"):
        _int_at_least(emb, key, "embedder", 1)
    _validate_api_keys(cfg)
    _validate_store(cfg.get("store"))
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    _require(isinstance(uri, str) and bool(uri.strip()), "tracking.uri", uri, "sqlite:///PATH/mlflow.db, a directory or http://HOST:PORT")


def _validate_dataset(ds: Any) -> None:
    subsets = list(ds.get("subsets") or [])
    _require(bool(subsets), "dataset.subsets", subsets, f"a non-empty list of {', '.join(SUBSETS)}")
    for s in subsets:
        _require(s in SUBSETS, "dataset.subsets", s, ", ".join(SUBSETS))
    source = ds.get("source")
    _require(source in ("auto", "local", "hub"), "dataset.source", source, "auto, local, hub")
    limit = ds.get("limit")
    _require(limit is None or (_is_int(limit) and limit >= 1), "dataset.limit", limit, "null or an integer >= 1")
    size = ds.get("corpus_size")
    _require(size is None or (_is_int(size) and size >= 1), "dataset.corpus_size", size, "null or an integer >= 1")
    splits = ds.get("question_splits")
    _require(
        splits is None or (OmegaConf.is_list(splits) and all(isinstance(s, str) and s for s in splits)),
        "dataset.question_splits", splits, "null or a list of split names, e.g. [test]",
    )
    path = ds.get("path")
    if source == "local":
        _require(path is not None and str(path).strip() != "", "dataset.path", path,
                 "a directory of <Subset>_<split>.parquet|jsonl files, or one such file (dataset.source=local)")
    if source in ("auto", "local") and path is not None:
        _require(Path(str(path)).exists(), "dataset.path", str(path),
                 "an existing directory of <Subset>_<split>.parquet|jsonl files, or one such file")


def _validate_rag_method(cfg: DictConfig, k: int) -> None:
    from t2exp import methods

    for mod in getattr(methods, "_MODULES", ()):  # importing a method module registers it
        importlib.import_module(f"t2exp.methods.{mod}")
    REGISTRY = methods.REGISTRY  # noqa: N806
    rm = cfg.rag_method
    name = rm.get("name")
    _require(name in REGISTRY, "rag_method.name", name, ", ".join(sorted(REGISTRY)))
    if "alpha" in rm:
        a = rm.alpha
        _require(_is_num(a) and 0.0 <= float(a) <= 1.0, "rag_method.alpha", a, "a number in [0, 1] (1 = dense, 0 = BM25)")
    if "fusion" in rm:
        _require(rm.fusion in FUSIONS, "rag_method.fusion", rm.fusion, ", ".join(FUSIONS))
    if "lexical" in rm:
        _require(rm.lexical in LEXICAL, "rag_method.lexical", rm.lexical, ", ".join(LEXICAL))
    if "first_stage" in rm:
        _require(rm.first_stage in FIRST_STAGES, "rag_method.first_stage", rm.first_stage, ", ".join(FIRST_STAGES))
    _int_at_least(rm, "candidate_depth", "rag_method", 1)
    if "candidates" in rm and rm.candidates is not None:
        c = rm.candidates
        _require(_is_int(c) and c >= k, "rag_method.candidates", c, f"null (3k) or an integer >= k ({k})")
    if "question_weight" in rm:
        w = rm.question_weight
        _require(_is_num(w) and 0.0 <= float(w) <= 1.0, "rag_method.question_weight", w, "a number in [0, 1]")
    cls = REGISTRY[name]
    reranker = cfg.get("reranker")
    if getattr(cls, "needs_reranker", False):
        _require(reranker is not None and bool(reranker.get("_target_")), "reranker", None if reranker is None else reranker.get("name"),
                 f"one of {_options('reranker')} (rag_method={name} rescores candidates with it)")
    gen = cfg.get("generator")
    if getattr(cls, "needs_generator", False):
        _require(gen is not None and bool(gen.get("_target_")), "generator", None if gen is None else gen.get("name"),
                 f"a generator, not none (rag_method={name} writes text with it): {_options('generator')}")


def _validate_generator(gen: Any) -> None:
    if gen is None or not gen.get("_target_"):
        return
    target = gen.get("_target_")
    mode = gen.get("answer_mode", "direct")
    _require(mode in MODES, "generator.answer_mode", mode, ", ".join(MODES))
    for group in ("sampling", "aux_sampling"):
        sampling = gen.get(group) or {}
        mt = sampling.get("max_tokens", 1)
        _require(_is_int(mt) and mt >= 1, f"generator.{group}.max_tokens", mt, "an integer >= 1")
        t = sampling.get("temperature", 0.0)
        _require(_is_num(t) and t >= 0, f"generator.{group}.temperature", t, "a number >= 0")
        p = sampling.get("top_p", 1.0)
        _require(_is_num(p) and 0 < p <= 1, f"generator.{group}.top_p", p, "a number in (0, 1]")
    for key, lo in (("batch_size", 1), ("max_concurrency", 1), ("max_retries", 0)):
        _int_at_least(gen, key, "generator", lo)
    if gen.get("timeout") is not None:
        _require(_is_num(gen.timeout) and gen.timeout > 0, "generator.timeout", gen.timeout, "a number of seconds > 0")
    backend = gen.get("backend") if target == _FACTORY else None
    if target == _FACTORY:
        _require(backend in GENERATOR_BACKENDS, "generator.backend", backend, ", ".join(GENERATOR_BACKENDS))
    if target in (_OPENAI_COMPAT, _FACTORY):
        model = gen.get("model")
        _require(isinstance(model, str) and bool(model.strip()), "generator.model", model,
                 "the model id the server serves (GET <base_url>/models), e.g. generator.model=Qwen/Qwen2.5-7B-Instruct")
    if backend == "vllm" and not _vllm_available():
        raise ConfigError(
            "generator.backend='vllm' is invalid: the vllm package is not installed; allowed: "
            f"{VLLM_HINT}, or generator.backend=openai (a running server) or vllm_server with generator.command"
        )
    if backend == "vllm_server":
        command = gen.get("command")
        if command is None:
            _require(_vllm_available(), "generator.command", None,
                     f"a command that starts vllm's OpenAI server (vllm is not installed here; {VLLM_HINT})")
        else:
            argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
            _require(bool(argv), "generator.command", command, "a non-empty command, e.g. [/opt/vllm/bin/python, -m, vllm.entrypoints.openai.api_server]")
            exe = argv[0]
            found = shutil.which(exe) is not None or (os.sep in exe and os.access(exe, os.X_OK))
            _require(found, "generator.command", exe, "an executable on PATH or an existing path")


def _is_openai_compat_generator(gen: Any) -> bool:
    target = gen.get("_target_")
    return target == _OPENAI_COMPAT or (target == _FACTORY and gen.get("backend", "openai") == "openai")


def _validate_api_keys(cfg: DictConfig) -> None:
    from t2exp.methods import REGISTRY

    method = REGISTRY.get(OmegaConf.select(cfg, "rag_method.name", default=None))
    for group in ("embedder", "generator", "reranker"):
        comp = cfg.get(group)
        if comp is None or not comp.get("_target_"):
            continue
        if group == "embedder" and method is not None and not getattr(method, "needs_index", True):
            continue  # the run builds no embedder
        provider = comp.get("provider")
        if group == "generator" and _is_openai_compat_generator(comp):
            if comp.get("base_url"):
                continue  # a local or self-hosted server: a key is optional
            envs: tuple[str, ...] = (comp.get("api_key_env") or "OPENAI_API_KEY",)
            provider = provider or "openai"
        elif provider in API_KEY_ENVS:
            envs = (comp.api_key_env,) if comp.get("api_key_env") else API_KEY_ENVS[provider]
        else:
            continue
        if comp.get("api_key") or any(os.environ.get(e) for e in envs):
            continue
        raise ConfigError(
            f"{group}.api_key=None is invalid and ${' / $'.join(envs)} is not set; allowed: an API key in "
            f"{' or '.join(envs)} or {group}.api_key ({group}={comp.get('name')} calls the {provider} API)"
        )


def _validate_store(store: Any) -> None:
    if store is None or store.get("connection") != "cloud":
        return
    url = store.get("cluster_url")
    _require(bool(url), "store.cluster_url", url, "https://<cluster>.weaviate.cloud (store.connection=cloud)")
    env = store.get("api_key_env") or "WEAVIATE_API_KEY"
    if not os.environ.get(env):
        raise ConfigError(f"store.api_key_env={env!r} is invalid: ${env} is not set; allowed: the name of a set variable holding the Weaviate Cloud key")
