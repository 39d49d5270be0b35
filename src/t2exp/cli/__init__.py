"""The commands beside the Hydra app, as subcommands of ``t2exp`` (``python -m t2exp <command>``
works too): each has ``main(argv, prog) -> int`` and is imported only when its command runs.
``t2exp <overrides>`` with no command is the experiment app itself (:mod:`t2exp.cli.app`)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

COMMANDS = {
    "score": ("t2exp.cli.score", "score any system's predictions against the gold answers"),
    "compare": ("t2exp.cli.compare", "two runs question by question: paired CI and p-value"),
    "explore": ("t2exp.cli.explore", "every question of a sweep's cells side by side in one HTML page"),
    "report": ("t2exp.cli.report", "paper-style tables and plots of a sweep's runs"),
    "collect": ("t2exp.cli.collect", "merge a sharded cell's finished shards into the cell's result and MLflow run"),
    "status": ("t2exp.cli.status", "a sweep's jobs: done, running, failed or pending (MLflow, the cache, Slurm)"),
    "reproduce": ("t2exp.cli.reproduce", "run the expected-numbers conditions (expected/*.yaml): OK/FAIL per metric"),
}


def run_command(name: str, argv: Sequence[str]) -> int:
    """Run the command ``name`` with ``argv`` (its arguments); its exit status."""
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(list(argv), prog=f"t2exp {name}"))
