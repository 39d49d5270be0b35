"""A failed composition or merge (OmegaConf's and Hydra's errors) as the one line a user reads:
:func:`config_error`, the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from t2exp.config.checks import not_a_setting
from t2exp.errors import ConfigError, causes, one_line

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
    return next((c for c in causes(exc) if isinstance(c, OmegaConfBaseException)), None)


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
