"""What ``t2exp status`` reads of a sweep besides its runs: every job its ``multirun.yaml`` makes
(the ones not started yet included), and its parent run found by the sweep's directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from t2exp.infra.mlflow_store import Tag


def expected_jobs(sweep_dir: Path) -> list[list[str]]:
    """The overrides of every job of the sweep in ``sweep_dir``, in job order, as Hydra's basic
    sweeper makes them from its ``multirun.yaml``; [] for another sweeper or no readable file."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from t2exp.infra.hydra_internals import BASIC_SWEEPER, basic_sweep_jobs

    try:
        cfg = OmegaConf.load(sweep_dir / "multirun.yaml")
        if OmegaConf.select(cfg, "hydra.sweeper._target_") != BASIC_SWEEPER:
            return []
        params = cfg.hydra.sweeper.get("params")
        plain = cast(dict[str, Any], OmegaConf.to_container(params, resolve=False)) if params else {}
        task = cast(list[str], OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False))  # ${oc.env:...} kept as written
        overrides = [f"{k}={v}" for k, v in plain.items()] + [str(o) for o in task]
        return basic_sweep_jobs(OverridesParser.create().parse_overrides(overrides))
    except Exception:  # no multirun.yaml, or one Hydra cannot read back: the jobs that started still tell
        return []


def filter_literal(value: str) -> str | None:
    """``value`` as a string of MLflow's search filter, which has no escapes: in the quotes it does
    not hold; None when it holds both kinds."""
    for quote in ("'", '"'):
        if quote not in value:
            return f"{quote}{value}{quote}"
    return None


def parent_run(client: Any, sweep_dir: Path) -> str | None:
    """The id of the latest parent run of the sweep in ``sweep_dir`` (its ``t2exp.sweep_dir`` tag:
    the directory as given or made absolute, else the same directory named another way, through a
    symbolic link or with ``..``), or None."""
    wanted = list(dict.fromkeys([str(sweep_dir.absolute()), str(sweep_dir)]))
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents, newest = f"tags.`{Tag.SWEEP}` = 'parent'", ["attributes.start_time DESC"]
    for value in wanted:
        literal = filter_literal(value)
        where = parents + (f" and tags.`{Tag.SWEEP_DIR}` = {literal}" if literal else "")
        runs = client.search_runs(experiments, filter_string=where, order_by=newest, max_results=1 if literal else 5000)
        found = [r for r in runs if r.data.tags.get(Tag.SWEEP_DIR) == value]
        if found:
            return str(found[0].info.run_id)
    real = sweep_dir.resolve()
    for run in client.search_runs(experiments, filter_string=parents, order_by=newest, max_results=5000):
        recorded = run.data.tags.get(Tag.SWEEP_DIR)
        if recorded and Path(recorded).resolve() == real:
            return str(run.info.run_id)
    return None
