"""The typed config: schemas (``schema``; the component groups in ``components``, ``methods``
and ``generators``) registered in Hydra's ConfigStore, cross-group rules (``rules``), and ``check`` — the
one validation every entry point calls before any work. Errors are one line naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, cast

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from t2exp.config import components as c
from t2exp.config import generators as g
from t2exp.config.checks import not_a_setting
from t2exp.config.rules import check_overrides, check_rules
from t2exp.config.schema import Config
from t2exp.errors import ConfigError, one_line

# (group, option) -> schema: YAMLs name them as ``/schema/<group>/<option>``
SCHEMAS: dict[tuple[str, str], type] = {
    ("rag_method", "method"): c.RagMethodConfig,
    ("rag_method", "hybrid"): c.HybridConfig,
    ("rag_method", "metadata_hybrid"): c.MetadataHybridConfig,
    ("rag_method", "reranker"): c.RerankMethodConfig,
    ("rag_method", "hyde"): c.HydeConfig,
    ("embedder", "sentence_transformers"): c.SentenceTransformerConfig,
    ("embedder", "api"): c.ApiEmbedderConfig,
    ("embedder", "gemini"): c.GeminiEmbedderConfig,
    ("embedder", "cohere"): c.CohereEmbedderConfig,
    ("store", "lancedb"): c.LanceDBConfig,
    ("store", "weaviate"): c.WeaviateConfig,
    ("reranker", "chunk_maxsim"): c.ChunkMaxSimConfig,
    ("reranker", "cross_encoder"): c.CrossEncoderConfig,
    ("reranker", "cohere"): c.CohereRerankConfig,
    ("reranker", "generator_pointwise"): c.GeneratorRerankerConfig,
    ("generator", "none"): g.NoGeneratorConfig,
    ("generator", "transformers"): g.TransformersGeneratorConfig,
    ("generator", "openai_compat"): g.OpenAICompatConfig,
    ("generator", "served_model"): g.ServedModelConfig,
}


def register_schema(group: str, name: str, node: type) -> None:
    """Make ``/schema/<group>/<name>`` available to YAML defaults lists (a plugin's own schema)."""
    ConfigStore.instance().store(group=f"schema/{group}", name=name, node=node)


def register() -> None:
    """Register the schemas and the OmegaConf resolvers (idempotent; call before composing)."""
    from t2exp.infra.paths import register_resolvers

    register_resolvers()
    cs = ConfigStore.instance()
    cs.store(name="t2exp_schema", node=Config)
    for (group, name), node in SCHEMAS.items():
        register_schema(group, name, node)


def check(cfg: DictConfig, overrides: list[str] | None = None) -> Config:
    """Build the typed config (runs every ``__post_init__`` check) and apply the cross-group
    rules, and the rules on what the command line changed (``overrides``, when given). Raises
    ``ConfigError``; returns the typed object."""
    plain = OmegaConf.masked_copy(cfg, [str(k) for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    try:
        refuse_unknown_keys(plain)
        typed = OmegaConf.to_object(plain)
        check_rules(plain)
        check_overrides(plain, overrides or [])
    except ConfigError:
        raise
    except OmegaConfBaseException as exc:
        raise config_error(exc, plain) from None
    return cast(Config, typed)


def refuse_unknown_keys(node: Any, prefix: str = "") -> None:
    """Keys a schema does not declare. Hydra's ``+key=value`` appends even to a structured node, so
    ``+foo=1`` or ``+rag_method.alpah=0`` would otherwise pass silently or fail deep in a constructor."""
    if not isinstance(node, DictConfig):
        return
    kind = OmegaConf.get_type(node)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        allowed = [f.name for f in dataclasses.fields(kind)]
        for key in map(str, node.keys()):
            if key not in allowed:
                raise not_a_setting(f"{prefix}{key}", kind)
    for key in map(str, node.keys()):
        refuse_unknown_keys(node._get_node(key), f"{prefix}{key}.")


_KINDS = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "a string"}


def config_error(exc: BaseException, cfg: Any = None) -> ConfigError:
    """One line for an OmegaConf/Hydra error (a type error from the schema, an unknown key, a
    missing value, an interpolation that does not resolve)."""
    cause = omegaconf_cause(exc) or exc
    key = getattr(cause, "full_key", None) or (_unresolvable_key(cfg) if cfg is not None else None) or "config"
    text = one_line(str(cause).split("\n")[0])
    schema = getattr(cause, "object_type", None)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and isinstance(schema, type) and dataclasses.is_dataclass(schema):
        return not_a_setting(key, schema)  # a key its typed node does not declare
    if isinstance(cause, MissingMandatoryValue):
        return ConfigError(f"{key} is missing; set it (e.g. {key}=VALUE on the command line)")
    if isinstance(cause, ValidationError):
        m = re.search(r"converted to (\w+)", text)
        kind = _KINDS.get(m.group(1), m.group(1)) if m else "a value of the schema's type"
        value = _override_value(exc, key)
        shown = value if value is not None else getattr(cause, "value", "?")
        return ConfigError(f"{key}={shown} is invalid; allowed: {kind} ({text[:160]})")
    if "not in" in text or "Could not override" in str(exc) or "Key '" in text:
        return ConfigError(
            f"{key} is not a setting of this config; allowed: the keys of its schema ({text[:160]}; `python -m t2exp --cfg job` lists them)"
        )
    return ConfigError(f"{key}: cannot resolve its value ({text[:200]})")


def omegaconf_cause(exc: BaseException) -> OmegaConfBaseException | None:
    """The OmegaConf error behind ``exc`` (Hydra's composition errors chain it as the cause, or
    only as the context when a YAML of the config search path failed to merge), else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OmegaConfBaseException):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _override_value(exc: BaseException, key: str) -> Any:
    """The value the user gave for ``key`` (from Hydra's "Error merging override k=v")."""
    head = str(exc).split("\n")[0]
    marker = f"override {key}="
    if marker in head:
        return head.split(marker, 1)[1].strip()
    return getattr(exc.__cause__, "value", None) if exc.__cause__ is not None else None


def _unresolvable_key(node: Any, prefix: str = "") -> str | None:
    """The first key whose value does not resolve."""
    if not OmegaConf.is_config(node):
        return None
    keys = range(len(node)) if OmegaConf.is_list(node) else list(node.keys())
    for k in keys:
        try:
            child = node[k]
        except OmegaConfBaseException:
            return f"{prefix}{k}"
        found = _unresolvable_key(child, f"{prefix}{k}.")
        if found:
            return found
    return None
