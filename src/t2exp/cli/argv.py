"""The command line before Hydra reads it: the help, one line for a mistyped command, and the app's
options moved ahead of its overrides (Hydra's argparse refuses ``rag_method=base -m k=3,5``)."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from t2exp.errors import ConfigError

MODES = {"run": "--run", "multirun": "-m", "cfg": "--cfg", "info": "--info", "shell_completion": "--shell-completion"}


def hydra_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with Hydra's options (``-m``, ``--cfg job``, ``--info config``, ...) ahead of the
    overrides, each kept in its order; an unknown option is moved too, for Hydra to name."""
    from t2exp.infra.hydra_internals import args_parser

    actions = args_parser()._option_string_actions
    options: list[str] = []
    overrides: list[str] = []
    modes: dict[str, str] = {}  # Hydra's modes given, as written (it takes one: a second is its traceback)
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            overrides.append(arg)
            i += 1
            continue
        take = 1
        action = actions.get(arg)  # None for "--cfg=job" (its value is attached) or an unknown option
        flag = arg.split("=", 1)[0]
        mode = actions.get(flag)
        if mode is not None and mode.dest in MODES:
            modes.setdefault(mode.dest, flag)
        if action is not None and action.nargs is None:
            take = 2
        elif action is not None and action.nargs == "?" and i + 1 < len(argv) and argv[i + 1] in (action.choices or ()):
            take = 2
        options.extend(argv[i : i + take])
        i += take
    if len(modes) > 1:
        fix = (
            "to see the config of one cell of a sweep, drop -m: python -m t2exp --cfg job <that cell's overrides>"
            if "multirun" in modes
            else "keep one of them"
        )
        raise ConfigError(
            f"{' and '.join(modes.values())} cannot be given together: Hydra runs one mode at a time ({', '.join(MODES.values())}); {fix}"
        )
    return options + overrides


def is_override(word: str) -> bool:
    """A word Hydra may read as an override or an option (``key=value``, ``+key=v``, ``~key``, ``-m``)."""
    return "=" in word or word.startswith(("-", "+", "~"))


def unknown_command(word: str, commands: Sequence[str]) -> ConfigError:
    """The one line for a first word that is neither a command nor an override."""
    close = difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(
        f"unknown command {word!r}; {hint}commands: {', '.join(commands)} "
        "(`t2exp --help` lists them); the experiment app takes overrides, key=value"
    )


def root_defaults(conf_dir: Path) -> list[Any]:
    """``conf_dir/config.yaml``'s defaults list, as written."""
    import yaml

    doc = yaml.safe_load((conf_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    return list(doc.get("defaults") or [])


def chosen_options(conf_dir: Path) -> dict[str, str]:
    """``group -> option`` the defaults list picks, interpolations (``${rag_method.name}``) as written."""
    return {
        str(key).removeprefix("optional ").split("@", 1)[0].strip(): str(value)
        for entry in root_defaults(conf_dir)
        if isinstance(entry, dict)
        for key, value in entry.items()
        if isinstance(value, str)
    }


def default_options(conf_dir: Path) -> dict[str, str]:
    """The option each group gets when the command line names none (a group picked by interpolation has none)."""
    return {g: o for g, o in chosen_options(conf_dir).items() if "${" not in o}


def config_groups(conf_dir: Path) -> dict[str, list[str]]:
    """``group -> options`` a user picks from in ``conf_dir`` (``+group`` where the defaults list has
    none; the default option starred); a group the defaults pick by interpolation (``protocol_method``) is left out."""
    defaults = chosen_options(conf_dir)
    found: dict[str, list[str]] = {}
    for path in sorted(conf_dir.rglob("*.yaml")):
        group = path.parent.relative_to(conf_dir).as_posix()
        if path.parent != conf_dir and "${" not in defaults.get(group, ""):
            name = "+" + group if group not in defaults and not group.startswith("hydra/") else group
            found.setdefault(name, []).append(path.stem + "*" * (defaults.get(group) == path.stem))
    return found


def usage(commands: dict[str, tuple[str, str]]) -> str:
    """``t2exp --help``: the commands and the config groups, one line each, and where to read more."""
    from t2exp.infra.paths import CONF_DIR

    groups = {g: ", ".join(o) for g, o in config_groups(CONF_DIR).items()}
    w = max(map(len, [*commands, *groups]))

    def rows(table: dict[str, str]) -> list[str]:
        return [textwrap.fill(t, 100, initial_indent=f"  {n:<{w}}  ", subsequent_indent=" " * (w + 4)) for n, t in table.items()]

    lines = [
        "usage: t2exp COMMAND [ARGS ...]      a command (t2exp COMMAND --help: its options)",
        "       t2exp [-m] [OVERRIDES ...]    the experiment app (python -m t2exp is the same)",
        "\ncommands:",
        *rows({n: s for n, (_, s) in commands.items()}),
        "\nconfig groups (OVERRIDES: group=option, +group=option, key=value; * the default):",
        *rows(groups),
        "\n-m sweeps comma-separated values (-m k=3,5); t2exp --cfg job [OVERRIDES] prints the composed",
        "config; t2exp --hydra-help lists Hydra's own flags; docs/config/ has a page per group.",
    ]
    return "\n".join(lines)
