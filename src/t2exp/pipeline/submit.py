"""Submit and return: ``hydra/launcher=slurm hydra.launcher.wait=false`` submits a sweep's cells
(or a sharded cell's shards) as one Slurm job array and ends; ``t2exp status`` shows where they are
and ``t2exp collect`` merges and logs what finished.

:class:`hydra_plugins.t2exp_submit.submit_launcher.SubmitLauncher` is hydra-submitit-launcher's
Slurm launcher with one more key, ``wait`` (default true). With ``wait=false`` it writes the jobs to
``<sweep dir>/t2exp_jobs.json`` (job ids, overrides, the sweep's parent run and store), prints how
to follow them and hands Hydra a placeholder result per job; the parent run stays RUNNING until
``t2exp status``/``collect`` sees every job ended. ``register_launcher`` stores the launcher's
schema as ``hydra/launcher/t2exp_slurm`` (conf/hydra/launcher/slurm.yaml builds on it)."""

from __future__ import annotations

import json
import logging
from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("t2exp")

LAUNCHER_CLASS = "hydra_plugins.t2exp_submit.submit_launcher.SubmitLauncher"  # Hydra takes launchers only from there
JOBS_FILE = "t2exp_jobs.json"


def register_launcher() -> None:
    """Store ``hydra/launcher/t2exp_slurm``: the submitit Slurm schema with ``wait`` and this
    module's launcher as its target (nothing without hydra-submitit-launcher installed)."""
    from hydra.core.config_store import ConfigStore

    try:
        from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    except ImportError:
        return
    node = make_dataclass(
        "T2ExpSlurmQueueConf",
        [
            ("_target_", str, field(default=LAUNCHER_CLASS)),
            ("wait", bool, field(default=True)),
        ],
        bases=(SlurmQueueConf,),
    )
    ConfigStore.instance().store(group="hydra/launcher", name="t2exp_slurm", node=node, provider="t2exp")


def read_jobs(sweep_dir: Path) -> dict[str, Any] | None:
    """The jobs a submit-and-return sweep left in ``sweep_dir`` (None: it was not one)."""
    path = sweep_dir / JOBS_FILE
    if not path.is_file():
        return None
    from t2exp.errors import DataError, one_line

    after = "the jobs run on: follow them with squeue, or give `t2exp collect` a cell's run directory"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise DataError(f"{path}: not valid JSON (a damaged file); {after}") from None
    if not isinstance(record, dict) or not isinstance(record.get("jobs"), list) or not record.get("tracking_uri"):
        raise DataError(f"{path}: not a record of jobs (an object with tracking_uri and jobs; a damaged file); {after}")
    for k, job in enumerate(record["jobs"]):
        num = job.get("num") if isinstance(job, dict) else None
        if type(num) is not int or not isinstance(job.get("overrides"), str):
            raise DataError(
                f"{path}: job #{k} is not a job's record (num={one_line(repr(num), 40)}: an integer, and its overrides; "
                f"a damaged file); {after}"
            )
    return record
