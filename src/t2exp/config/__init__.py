"""The typed config: schemas (``schema``; the component groups in ``components``, ``methods``
and ``generators``) registered in Hydra's ConfigStore, cross-group rules (``rules``), and ``check`` — the
one validation every entry point calls before any work. Errors are one line naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from t2exp.config import components as c
from t2exp.config import generators as g
from t2exp.config.checks import not_a_setting
from t2exp.config.messages import config_error as config_error  # re-exported: the one line of a config error
from t2exp.config.messages import omegaconf_cause as omegaconf_cause
from t2exp.config.rules import check_overrides, check_rules
from t2exp.config.schema import Config
from t2exp.errors import ConfigError

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
    """Register the schemas and the OmegaConf resolvers (call before composing). Each schema is
    stored once per process (about 70 ms for all of them): a later call only stores what is new."""
    from t2exp.infra.hydra_internals import share_config_store
    from t2exp.infra.paths import register_resolvers

    register_resolvers()
    share_config_store()
    if _STORED.get(("", "t2exp_schema")) is not Config:
        ConfigStore.instance().store(name="t2exp_schema", node=Config)
        _STORED[("", "t2exp_schema")] = Config
    for (group, name), node in SCHEMAS.items():
        if _STORED.get((group, name)) is not node:
            register_schema(group, name, node)
            _STORED[(group, name)] = node


# what register() has stored in this process, (group, name) -> schema
_STORED: dict[tuple[str, str], type] = {}


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


def to_dict(cfg: DictConfig) -> dict[str, Any]:
    """The resolved plain dict of a config node (``OmegaConf.to_container`` of a DictConfig is a dict)."""
    return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
