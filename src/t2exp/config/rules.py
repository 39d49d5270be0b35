"""Rules across config groups, checked once before any work: what a rag_method needs from the
other groups (a generator, a reranker, candidates >= k), API keys of the components a run will
build, and the generator backends that need software this machine may lack. A component's own
facts (``needs_generator``, ``needs_reranker``, ``needs_index``, ``key_envs``) are read from its
class, so they live in one place."""

from __future__ import annotations

import inspect
import os
import shlex
import shutil
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t2exp.config.checks import invalid, require
from t2exp.config.components import target_class
from t2exp.errors import ConfigError
from t2exp.infra.option_meta import META_FIELDS, META_KEY, OptionMeta

VLLM_HINT = "install t2exp[vllm] (GPU machines)"
_FACTORY = "t2exp.generators.factory.make_generator"


def options(group: str) -> str:
    """The options of a config group, for messages (``minilm, e5, ...``)."""
    from t2exp.infra.paths import CONF_DIR

    names = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    return ", ".join(names) if names else f"see conf/{group}/"


def _built(node: Any) -> bool:
    return node is not None and bool(node.get("_target_"))


def check_untyped(group: str, node: Any, extra: tuple[str, ...] = ()) -> None:
    """A component without a schema of its own (a plugin's YAML): its keys must be arguments of
    its ``_target_``'s signature (``extra``: arguments the app passes itself)."""
    if not _built(node) or OmegaConf.get_type(node) is not dict:
        return
    if META_KEY in node:
        check_meta(group, node[META_KEY])
    cls = target_class(node._target_, f"{group}._target_")
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return  # no signature to check against
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    allowed = [n for n in params if n not in extra]
    for key in node:
        if key not in ("_target_", META_KEY) and key not in params:  # meta: for readers, never passed (build)
            raise ConfigError(f"{group}.{key} is not a setting of {node._target_}; allowed: {', '.join(allowed)}")


def check_meta(group: str, block: Any) -> None:
    """An untyped option's ``meta:`` block against the schema a typed option's has (``OptionMeta``):
    a misspelt key or a value of the wrong type is one line naming ``<group>.meta.<key>``."""
    from omegaconf.errors import OmegaConfBaseException

    from t2exp.config.messages import config_error

    if not OmegaConf.is_dict(block):
        raise invalid(f"{group}.{META_KEY}", block, f"a mapping of {', '.join(META_FIELDS)}")
    typed = OmegaConf.create({group: {META_KEY: OmegaConf.structured(OptionMeta)}})
    try:
        OmegaConf.merge(typed, {group: {META_KEY: block}})
    except OmegaConfBaseException as exc:
        raise config_error(exc) from None


def check_overrides(cfg: DictConfig, overrides: list[str]) -> None:
    """Rules on what the command line changed, where the composed values alone cannot tell."""
    changed = {o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o and not o.startswith("-")}
    emb = cfg.get("embedder")
    if emb is not None and emb.get("package") and "embedder.model" in changed and "embedder.package" not in changed:
        # the option's packaged weights would load whatever model says, and params, run name and
        # cell key would name the other model
        raise ConfigError(
            f"embedder.model={emb.model} is invalid with embedder={emb.name}: that option loads the weights shipped in "
            f"the package {emb.package}, whatever embedder.model says; allowed: add embedder.package=null to load "
            f"{emb.model} (hub id or local path), or choose another embedder option"
        )


def _require_generator(gen: Any, why: str) -> None:
    require(_built(gen), "generator", None if gen is None else gen.get("name"), f"a generator, not none ({why}): {options('generator')}")


def check_rules(cfg: DictConfig) -> None:
    for group in ("rag_method", "embedder", "store", "reranker", "generator"):
        node = cfg.get(group)
        if group != "store" and node is not None and "_target_" in node and "name" not in node:  # a plugin option without its name
            raise ConfigError(
                f"{group}.name is missing; allowed: the option's name, set in its YAML (name: <option>): "
                f"run names, params, reports and the cell key use it"
            )
        check_untyped(group, node, extra=("reranker",) if group == "rag_method" else ())
    method = target_class(cfg.rag_method._target_, "rag_method._target_")
    name = cfg.rag_method.name
    k = int(cfg.k)
    gen = cfg.get("generator")
    if getattr(method, "needs_reranker", False):
        rr = cfg.get("reranker")
        require(
            _built(rr),
            "reranker",
            None if rr is None else rr.get("name"),
            f"one of {options('reranker')} (rag_method={name} rescores candidates with it)",
        )
        if getattr(target_class(rr._target_, "reranker._target_"), "needs_generator", False):
            _require_generator(gen, f"reranker={rr.get('name')} grades candidates with it")
    candidates = cfg.rag_method.get("candidates")
    if candidates is not None:
        require(candidates >= k, "rag_method.candidates", candidates, f"null (max(3k, k + 2)) or an integer >= k ({k})")
    if getattr(method, "needs_generator", False):
        _require_generator(gen, f"rag_method={name} writes text with it")
    if _built(gen):
        _check_backend(gen)
    store = cfg.get("store")
    if needs_index := getattr(method, "needs_index", True):
        _check_store(store)
    for group in ("embedder", "generator", "reranker"):
        comp = cfg.get(group)
        if _built(comp) and not (group == "embedder" and not needs_index):
            _check_key(group, comp)


def _check_store(store: Any) -> None:
    if store is None or store.get("connection") != "cloud":
        return
    env = store.get("api_key_env") or "WEAVIATE_API_KEY"
    if not os.environ.get(env):
        raise ConfigError(
            f"store.api_key_env={env!r} is invalid: ${env} is not set; allowed: the name of a set variable holding the Weaviate Cloud key"
        )


def _check_backend(gen: Any) -> None:
    from t2exp.generators import vllm_backend

    backend = gen.get("backend") if gen._target_ == _FACTORY else None
    vllm = vllm_backend.vllm_available()
    if backend == "vllm" and not vllm:
        raise ConfigError(
            "generator.backend='vllm' is invalid: the vllm package is not installed; allowed: "
            f"{VLLM_HINT}, or generator.backend=openai (a running server) or vllm_server with generator.command"
        )
    if backend != "vllm_server":
        return
    command = gen.get("command")
    if command is None:
        require(vllm, "generator.command", None, f"a command that starts vllm's OpenAI server (vllm is not installed here; {VLLM_HINT})")
        return
    argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    require(
        bool(argv), "generator.command", command, "a non-empty command, e.g. [/opt/vllm/bin/python, -m, vllm.entrypoints.openai.api_server]"
    )
    exe = argv[0]
    found = shutil.which(exe) is not None or (os.sep in exe and os.access(exe, os.X_OK))
    require(found, "generator.command", exe, "an executable on PATH or an existing path")


def _key_envs(group: str, comp: Any) -> tuple[str, ...] | None:
    """The variables one of which must hold the key, or ``None`` when the component needs none."""
    if group == "generator" and "api_key_env" in comp and "model" in comp:  # OpenAI-compatible
        if comp.get("backend", "openai") != "openai" or comp.get("base_url"):
            return None  # a local or self-hosted server: a key is optional
        return (comp.get("api_key_env") or "OPENAI_API_KEY",)
    envs = getattr(target_class(comp._target_, f"{group}._target_"), "key_envs", None)
    if not envs:
        return None
    return (comp.api_key_env,) if comp.get("api_key_env") else tuple(envs)


def _check_key(group: str, comp: Any) -> None:
    envs = _key_envs(group, comp)
    if envs is None or comp.get("api_key") or any(os.environ.get(e) for e in envs):
        return
    provider = comp.get("provider") or "openai"
    raise ConfigError(
        f"{group}.api_key=None is invalid and ${' / $'.join(envs)} is not set; allowed: an API key in {' or '.join(envs)} "
        f"or {group}.api_key ({group}={comp.get('name')} calls the {provider} API)"
    )
