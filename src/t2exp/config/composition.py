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
        return None
    error = config_error(exc)
    m = _IN_YAML.match(str(exc))
    if m is None:
        return error
    group, _, option = m.group(1).rpartition("/")
    where = f"{m.group(1)}.yaml (the option {group}={option})" if group else f"{m.group(1)}.yaml"
    return ConfigError(f"{where}: {error}")
