"""``hydra/sweeper=held_out_optuna``: tune on some questions, report on others.

hydra-optuna-sweeper's ``OptunaSweeper`` (``pip install 't2exp[tune]'``) runs the trials with its
own keys; ``register_sweeper`` stores this sweeper as ``held_out_optuna`` (and as ``optuna``, its
old name, with one warning). Its schema adds ``held_out`` and the defaults ``direction: maximize``,
``n_jobs: 1``. Every trial is a t2exp job on the *tuning* questions (``dataset.fold_role=tune``)
returning the run's ``objective``; then the best overrides run once more with
``dataset.fold_role=eval``, on the held-out fold no trial saw. The sweep's MLflow parent gets the
tuned parameters (``tune.best.<key>``), ``tune/tune_score``, ``tune/eval_score`` and what each was
measured on (``t2exp.tuned_on``, ``t2exp.reported_on``). ``hydra.sweeper.held_out=false`` runs the
plain Optuna sweep: its best value is a score on the questions it was chosen on, logged as such."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from t2exp.errors import ConfigError
from t2exp.infra.mlflow_store import Tag

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 't2exp[tune]' (hydra-optuna-sweeper)"
ROLE_KEY = "dataset.fold_role"
# Hydra instantiates sweepers only from the hydra_plugins package: the class is there, its logic here
SWEEPER_CLASS = "hydra_plugins.t2exp_tuning.held_out_optuna.HeldOutOptunaSweeper"
NAME = "held_out_optuna"  # hydra/sweeper=held_out_optuna
OLD_NAME = "optuna"  # the plugin's own name, this sweeper's until issue 45: an alias with a warning


@dataclass
class Trial:
    overrides: list[str]
    value: float | None


class RecordingLauncher:
    """The sweeper's launcher, remembering every job's overrides and return value."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher
        self.trials: list[Trial] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        returns = self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
        for overrides, ret in zip(job_overrides, returns, strict=True):
            try:
                value = None if ret.return_value is None else float(ret.return_value)
            except Exception:  # a failed job: Hydra's JobReturn re-raises its error
                value = None
            self.trials.append(Trial(list(overrides), value))
        return returns

    def best(self, maximize: bool) -> Trial | None:
        """The first trial with the best value (Optuna's ``best_trial`` rule)."""
        scored = [t for t in self.trials if t.value is not None]
        if not scored:
            return None
        pick = max if maximize else min
        return pick(scored, key=lambda t: t.value)  # type: ignore[arg-type, return-value]


def with_role(overrides: Sequence[str], role: str) -> list[str]:
    """``overrides`` with ``dataset.fold_role`` set to ``role`` (last, replacing any other)."""
    return [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != ROLE_KEY] + [f"{ROLE_KEY}={role}"]


def register_sweeper() -> None:
    """Scan Hydra's plugins now (once per process: the scan registers hydra-optuna-sweeper's own
    ``hydra/sweeper/optuna`` schema), then store this module's sweeper as ``held_out_optuna`` and
    under the plugin's name (the alias of old configs): its schema is the plugin's plus ``held_out``,
    with ``direction: maximize`` and ``n_jobs: 1``. Without the plugin installed, nothing is stored
    (``hydra/sweeper=held_out_optuna`` is then Hydra's "could not find")."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()
    try:
        from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf
    except ImportError:
        return
    node = make_dataclass(
        "HeldOutOptunaSweeperConf",
        [
            ("_target_", str, field(default=SWEEPER_CLASS)),
            ("held_out", bool, field(default=True)),
            ("direction", Any, field(default="maximize")),
            ("n_jobs", int, field(default=1)),  # trials per batch: one, so every trial's sampler has seen the ones before
        ],
        bases=(OptunaSweeperConf,),
    )
    for name in (NAME, OLD_NAME):
        ConfigStore.instance().store(group="hydra/sweeper", name=name, node=node, provider="t2exp")


def warn_old_name(config: Any) -> None:
    """One warning when the sweep chose this sweeper by its old name, ``hydra/sweeper=optuna``."""
    from omegaconf import OmegaConf

    if OmegaConf.select(config, "hydra.runtime.choices", default={}).get("hydra/sweeper") == OLD_NAME:
        log.warning("hydra/sweeper=%s is the old name of hydra/sweeper=%s (t2exp's held-out tuner); it runs the same", OLD_NAME, NAME)


def log_parent(
    config: Any,
    objective: str,
    maximize: bool,
    tuned: dict[str, str],
    tune_value: float | None,
    eval_value: float | None,
    n_trials: int,
    held_out: bool,
) -> None:
    """The tuning's outcome, logged and put on the sweep's MLflow parent run."""
    from t2exp.data.folds import describe
    from t2exp.tracking.mlflow_run import PARENT_ENV, Tracker

    ds = config.dataset
    folds, fold, seed = ds.get("folds"), ds.get("fold"), int(ds.get("fold_seed", 0))
    tuned_on = describe(folds, fold, "tune" if held_out else str(ds.get("fold_role")), seed)
    reported_on = describe(folds, fold, "eval", seed) if held_out else "(no held-out run: hydra.sweeper.held_out=false)"
    log.info("tuning: best %s = %s on %s (%s)", objective, tune_value, tuned_on, ", ".join(f"{k}={v}" for k, v in tuned.items()))
    if eval_value is not None:
        log.info("tuning: the same parameters score %s = %s on %s (held out)", objective, eval_value, reported_on)
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return
    tracker = Tracker.attach(str(config.tracking.uri), parent)
    params = {
        "tune.objective": objective,
        "tune.direction": "maximize" if maximize else "minimize",
        "tune.trials": n_trials,
        "tune.tuned_on": tuned_on,
        "tune.reported_on": reported_on,
        **{f"tune.best.{k}": v for k, v in tuned.items()},
    }
    tracker.log_params(params)
    tracker.log_metrics({k: v for k, v in (("tune/tune_score", tune_value), ("tune/eval_score", eval_value)) if v is not None})
    tracker.set_tags({Tag.TUNED_ON: tuned_on, Tag.REPORTED_ON: reported_on, Tag.SWEEP_KIND: "tune"})


def check_folds(config: Any, held_out: bool) -> None:
    if held_out and not config.dataset.get("folds"):
        raise ConfigError(
            f"dataset.folds=None is invalid for hydra/sweeper={NAME}: it tunes on some questions and reports on others; "
            "allowed: dataset.folds=N dataset.fold=F (tune on every fold but F, report on F), or hydra.sweeper.held_out=false"
        )


def direction(direction: Any) -> str:
    if not isinstance(direction, str) and not hasattr(direction, "name"):  # a list: several objectives
        raise ConfigError(f"hydra.sweeper.direction={direction} is invalid: t2exp tunes one objective; allowed: maximize or minimize")
    return str(getattr(direction, "name", direction))


def searched_keys(arguments: Sequence[str], params: Any) -> set[str]:
    """The keys Optuna searches: sweep overrides (``interval(...)``, ``choice(...)``, ``a,b``) of
    the command line and of ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = list(arguments) + [f"{k}={v}" for k, v in (params or {}).items()]
    parsed = OverridesParser.create().parse_overrides(lines)
    return {o.key_or_group for o in parsed if o.is_sweep_override()}
