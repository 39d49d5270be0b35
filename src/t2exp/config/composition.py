"""Composing the config as ``python -m t2exp`` composes it, for the command line's pre-flight
check: the same config search path (the app's ``conf/``, then a user's ``--config-dir``, as Hydra
adds it; ``hydra.searchpath`` entries come with the overrides), and a composition that fails on the
typed schema as one line naming the option YAML it failed in (a user's own option file: a
misspelt key, also inside its ``meta:`` block, or a value of the wrong type)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from t2exp.errors import ConfigError

_IN_YAML = re.compile(r"^In '([^']+)': ")  # Hydra: "In 'rag_method/mine': ConfigKeyError raised while composing config"
# Hydra, for an option of a group no default chooses: "Could not override 'reranker'. ... use +reranker=bge"
_NOT_IN_DEFAULTS = re.compile(r"Could not override '(\w+)'\. No match in the defaults list\.\s+To append to your default list use \+(\S+)")


@contextmanager
def app_context(config_dir: str | None = None, job_name: str = "t2exp") -> Iterator[None]:
    """Hydra initialised with the app's search path (``hydra.initialize_config_dir`` of ``conf/``,
    plus ``config_dir`` where the app's ``--config-dir`` puts it: after ``conf/``, before the schemas)."""
    from hydra import version
    from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from t2exp.infra.hydra_internals import create_main_hydra
    from t2exp.infra.paths import CONF_DIR

    def user_dir(search_path: ConfigSearchPath) -> None:
        if config_dir is not None:
            search_path.prepend(
                provider="command-line", path=f"file://{os.path.abspath(config_dir)}", anchor=SearchPathQuery(provider="schema")
            )

    backup = get_gh_backup()
    version.setbase("1.3")
    try:
        create_main_hydra(str(CONF_DIR), job_name, user_dir)
        yield
    finally:
        restore_gh_from_backup(backup)


def composition_error(exc: BaseException) -> ConfigError | None:
    """One line for a composition that failed on the typed schema (an unknown key, a wrong type, a
    missing value), prefixed with the option YAML it failed in where Hydra names one; None for any
    other failure (an unknown option, a syntax error: Hydra explains those)."""
    from t2exp.config.messages import config_error, omegaconf_cause

    if omegaconf_cause(exc) is None:
        return _chosen_inside(str(exc))
    error = config_error(exc)
    m = _IN_YAML.match(str(exc))
    if m is None:
        return error
    group, _, option = m.group(1).rpartition("/")
    where = f"{m.group(1)}.yaml (the option {group}={option})" if group else f"{m.group(1)}.yaml"
    return ConfigError(f"{where}: {error}")


def _chosen_inside(message: str) -> ConfigError | None:
    """An option of a group that one option of another group brings (``reranker``, chosen inside
    ``rag_method=reranker``) given alone: one line naming the option to add; None for anything else."""
    from t2exp.infra.paths import CONF_DIR

    m = _NOT_IN_DEFAULTS.search(message)
    if m is None:
        return None
    group, given = m.groups()
    brings = re.compile(rf"^\s*-\s*/{group}@", re.MULTILINE)
    owners = sorted(f"{f.parent.name}={f.stem}" for f in CONF_DIR.glob("*/*.yaml") if brings.search(f.read_text(encoding="utf-8")))
    if not owners:
        return None
    return ConfigError(f"{given}: the {group} group is chosen inside {' or '.join(owners)}; add it: {owners[0]} {given}")
