"""``shards=N`` on the command line (or in an experiment file) becomes N jobs: before Hydra starts,
the app adds the sweep ``shard=0,1,...,N-1`` (and ``-m``), so Hydra's launcher runs the shards of
every cell as it runs a sweep's cells — one after another (basic), as local processes
(``hydra/launcher=local_parallel``) or as the tasks of one Slurm job array
(``hydra/launcher=slurm``). A command that sets ``shard`` itself runs just those shards (a killed
shard re-run alone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t2exp.errors import ConfigError
from t2exp.infra.hydra_internals import BASIC_SWEEPER


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def expand_shards(argv: list[str], parse: Callable[[list[str]], tuple[Any, ...] | None]) -> list[str]:
    """``argv`` with the shard sweep added when the run's ``shards`` is more than 1 and no
    ``shard`` is given (``parse``: the app's reading of a command line into overrides and ``-m``;
    None for a command Hydra answers itself). Only a command line that names shards or an
    experiment (whose file may set them) is composed here: the others are left as they are."""
    parsed = parse(argv)
    if parsed is None:
        return argv
    overrides, multirun = parsed[0], parsed[1]
    if not any("shard" in o or "experiment" in o for o in overrides):
        return argv
    if any(_key(o) == "shard" for o in overrides):
        return argv  # the shards the user named
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from t2exp.infra.paths import CONF_DIR

    parsed_overrides = OverridesParser.create().parse_overrides(overrides)
    if any(o.key_or_group == "shards" and o.is_sweep_override() for o in parsed_overrides):
        raise ConfigError("shards is invalid as a sweep: one number of shards per command; allowed: an integer >= 1, e.g. shards=4")
    plain = [str(o.input_line) for o in parsed_overrides if not o.is_sweep_override()]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="t2exp"):
        base = compose("config", overrides=plain, return_hydra_config=True)
    n = int(OmegaConf.select(base, "shards", default=1) or 1)
    if n <= 1:
        return argv
    if OmegaConf.select(base, "hydra.sweeper._target_", default=None) != BASIC_SWEEPER:
        raise ConfigError(
            f"shards={n} is invalid with this sweeper: a sharded cell runs as a sweep of its shards; "
            "allowed: Hydra's basic sweeper (the default), or shards=1"
        )
    return [*([] if multirun else ["-m"]), *argv, f"shard={','.join(map(str, range(n)))}"]
