"""The ``hydra/launcher=slurm`` launcher t2exp installs: hydra-submitit-launcher's, which can also
submit and return (``hydra.launcher.wait=false``; :mod:`t2exp.pipeline.submit`). Hydra
instantiates launchers only from the ``hydra_plugins`` package, so the class lives here and its
helpers in ``t2exp.pipeline.submit``. Without hydra-submitit-launcher (``pip install
't2exp[slurm]'``) the class is an unused stub: ``register_launcher`` then stores no schema."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # not installed: hydra/launcher=slurm is then Hydra's "could not find"
    from hydra.plugins.launcher import Launcher as SlurmLauncher  # type: ignore[assignment, unused-ignore]

from t2exp.infra.cache import atomic_write_text
from t2exp.infra.redaction import redact_overrides
from t2exp.pipeline.submit import JOBS_FILE, read_jobs

log = logging.getLogger("t2exp")


class SubmitLauncher(SlurmLauncher):
    """hydra-submitit-launcher's Slurm launcher; ``wait=false``: submit, record, return."""

    def __init__(self, wait: bool = True, **params: Any) -> None:
        super().__init__(**params)
        self.wait = bool(wait)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        if self.wait:
            return list(super().launch(job_overrides, initial_job_idx))
        jobs = self._submit(job_overrides, initial_job_idx)
        self._record(jobs, job_overrides, initial_job_idx)
        return [_placeholder(o) for o in job_overrides]

    def _executor(self) -> Any:
        """The executor hydra-submitit-launcher's ``launch`` builds, with the same parameters."""
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
        from omegaconf import OmegaConf

        init_keys = {"max_num_timeout", "submitit_folder"}
        executor = submitit.AutoExecutor(
            cluster=self._EXECUTOR,
            folder=self.params["submitit_folder"],
            **{f"{self._EXECUTOR}_{k}": v for k, v in self.params.items() if k == "max_num_timeout"},
        )
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in self.params.items() if k not in init_keys})
        return executor

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        from hydra.core.singleton import Singleton

        assert self.config is not None, "Hydra calls setup() before launch()"
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        params = [
            (list(o), "hydra.sweep.dir", initial_job_idx + n, f"job_id_for_{initial_job_idx + n}", Singleton.get_state())
            for n, o in enumerate(job_overrides)
        ]
        return list(self._executor().map_array(self, *zip(*params, strict=True)))

    def _record(self, jobs: list[Any], job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> None:
        """Add the submitted jobs to the sweep's ``t2exp_jobs.json``; print what to run next."""
        from t2exp.tracking.mlflow_run import PARENT_ENV

        assert self.config is not None, "Hydra calls setup() before launch()"
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        record = read_jobs(sweep_dir) or {
            "parent_run": os.environ.get(PARENT_ENV),
            "tracking_uri": str(self.config.tracking.uri),
            "experiment": str(self.config.tracking.experiment),
            "work": str(self.config.paths.work),  # where `t2exp collect` writes the sweep's report
            "jobs": [],
        }
        record["jobs"] += [
            {"num": initial_job_idx + n, "slurm_job": str(j.job_id), "overrides": " ".join(redact_overrides(list(o)))}
            for n, (j, o) in enumerate(zip(jobs, job_overrides, strict=True))
        ]
        atomic_write_text(sweep_dir / JOBS_FILE, json.dumps(record, indent=1))
        ids = [str(j.job_id) for j in jobs]
        print(
            f"t2exp: submitted {len(ids)} jobs to Slurm ({', '.join(ids)}); they run without this process\n"
            f"t2exp: where they are:      t2exp status {sweep_dir}\n"
            f"t2exp: when they have ended: t2exp collect {sweep_dir}",
            file=sys.stderr,
            flush=True,
        )
        log.info(
            "submitted %d jobs (%s); parent run %s stays RUNNING until `t2exp collect %s`",
            len(ids),
            ", ".join(ids),
            record["parent_run"],
            sweep_dir,
        )


def _placeholder(overrides: Sequence[str]) -> Any:
    """What Hydra gets for a job it did not wait for: completed, with no value."""
    from hydra.core.utils import JobReturn, JobStatus

    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=None)
