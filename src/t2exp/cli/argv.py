"""The experiment app's command line before Hydra reads it (``t2exp`` / ``python -m t2exp`` with no
command): the command table on ``--help``, one line for a mistyped command, and the options moved
ahead of the overrides.

Hydra's argparse reads the overrides as one positional list, so ``rag_method=base -m k=3,5`` is
an argparse error there (``unrecognized arguments: k=3,5``); :func:`hydra_argv` puts every
option (with its value) first and keeps the overrides in their order, so an option may stand
anywhere on the line."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from t2exp.errors import ConfigError

HELP_FLAGS = ("-h", "--help")
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


def usage(commands: dict[str, tuple[str, str]]) -> str:
    """What ``t2exp --help`` prints before the experiment app's own help: the commands, one line each."""
    width = max(len(name) for name in commands)
    lines = [
        "usage: t2exp COMMAND [ARGS ...]      a command (t2exp COMMAND --help: its options)",
        "       t2exp [-m] [OVERRIDES ...]    the experiment app (python -m t2exp is the same)",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in commands.items()]
    lines += [
        "",
        "The experiment app's help follows: its config groups and every value, each a key=value",
        "override (-m sweeps comma-separated values); t2exp --hydra-help lists Hydra's own flags.",
        "",
    ]
    return "\n".join(lines)


def app_argv(argv: Sequence[str], commands: dict[str, tuple[str, str]]) -> list[str]:
    """The experiment app's ``argv`` as Hydra should read it (:func:`hydra_argv`), after the command
    table on ``-h``/``--help``; a first word that is neither a command nor an override raises."""
    if argv and not is_override(argv[0]):
        raise unknown_command(argv[0], list(commands))
    if any(a in HELP_FLAGS for a in argv):
        print(usage(commands))
    return hydra_argv(argv)
