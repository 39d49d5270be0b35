"""What ``t2exp status`` reads of a sweep besides its runs: its parent run found by the sweep's
directory (every job its ``multirun.yaml`` makes: :func:`t2exp.infra.hydra_internals.expected_jobs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t2exp.infra.mlflow_store import Tag


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
