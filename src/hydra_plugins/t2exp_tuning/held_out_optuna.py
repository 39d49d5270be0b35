"""The ``hydra/sweeper=held_out_optuna`` sweeper t2exp installs (``t2exp.pipeline.tuning``): Optuna on the
tuning folds, then the best trial on the held-out fold. Hydra instantiates sweepers only from the
``hydra_plugins`` package, so the class lives here and its helpers in ``t2exp.pipeline.tuning``."""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig


class HeldOutOptunaSweeper(Sweeper):
    def __init__(self, held_out: bool = True, **optuna: Any) -> None:
        from t2exp.errors import ConfigError
        from t2exp.pipeline.tuning import INSTALL_HINT, NAME

        try:
            from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
        except ImportError:
            raise ConfigError(f"hydra/sweeper={NAME} is invalid: hydra-optuna-sweeper is not installed; allowed: {INSTALL_HINT}") from None
        self.held_out = bool(held_out)
        self.inner = OptunaSweeper(**optuna)
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        from t2exp.pipeline.tuning import warn_old_name

        warn_old_name(config)
        self.inner.setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.config = config

    def sweep(self, arguments: list[str]) -> None:
        from t2exp.pipeline import tuning
        from t2exp.pipeline.cell import objective_name

        assert self.config is not None, "Hydra calls setup() first"
        tuning.check_folds(self.config, self.held_out)
        impl = self.inner.sweeper  # hydra-optuna-sweeper's OptunaSweeperImpl: its launcher runs every trial
        recorder = tuning.RecordingLauncher(impl.launcher)
        impl.launcher = recorder
        impl.sweep(tuning.with_role(arguments, "tune") if self.held_out else list(arguments))
        maximize = tuning.direction(impl.direction) == "maximize"
        best = recorder.best(maximize)
        if best is None:
            tuning.log.warning("tuning: no trial returned a value; nothing to evaluate")
            return
        eval_value = None
        if self.held_out:
            (ret,) = recorder.launcher.launch([tuning.with_role(best.overrides, "eval")], initial_job_idx=impl.job_idx)
            impl.job_idx += 1
            eval_value = None if ret.return_value is None else float(ret.return_value)
        searched = tuning.searched_keys(arguments, impl.params)
        tuned = dict(o.split("=", 1) for o in best.overrides if o.split("=", 1)[0] in searched)
        tuning.log_parent(
            self.config, objective_name(self.config), maximize, tuned, best.value, eval_value, len(recorder.trials), self.held_out
        )
