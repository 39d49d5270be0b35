"""The one shape of a config error, and the range checks schema ``__post_init__`` methods use.

Every message is one line: ``<key>=<value> is invalid; allowed: <what>``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from t2exp.errors import ConfigError

# the grammar of a metric's name: what ``objective`` and the metric arguments of score, compare and
# report may name, and what the evaluator writes (t2exp.evaluation.metrics reads it from here: the
# config, below the evaluation, checks names before any run)
METRIC = re.compile(r"^(nm|nm_bare|nm_strict|mrr_at_[1-9]\d*|recall_at_[1-9]\d*)$")
METRIC_NAMES = "nm, nm_bare, nm_strict, mrr_at_<k>, recall_at_<r> (k, r >= 1)"  # METRIC in words


def invalid(key: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"{key}={value!r} is invalid; allowed: {allowed}")


def not_a_setting(key: str, schema: type) -> ConfigError:
    """A key the schema (a dataclass) does not declare: the allowed keys, in its order."""
    allowed = ", ".join(f.name for f in dataclasses.fields(schema))
    return ConfigError(f"{key} is not a setting of {schema.__name__}; allowed: {allowed}")


def require(cond: bool, key: str, value: object, allowed: str) -> None:
    if not cond:
        raise invalid(key, value, allowed)


def at_least(key: str, value: Any, lo: float, *, optional: bool = False) -> None:
    """``value >= lo`` (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return
    kind = "an integer" if isinstance(lo, int) else "a number"
    require(value is not None and value >= lo, key, value, f"{'null or ' if optional else ''}{kind} >= {lo}")


def between(key: str, value: float, lo: float, hi: float, note: str = "") -> None:
    require(lo <= value <= hi, key, value, f"a number in [{lo:g}, {hi:g}]{note}")


def one_of(key: str, value: object, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    require(value in allowed, key, value, ", ".join(allowed))
