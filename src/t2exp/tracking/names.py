"""Run names a person can read in the MLflow UI, which truncates long names: ``method · embedder
· k=3`` for a run, and for the cells of a sweep that plus the keys the cells differ in
(``base · minilm · k=3 · corpus_size=20``): from the moment a cell's run opens when Hydra's basic
sweeper made the sweep, and set on every child when the sweep ends. A cell run again in the same
experiment says so: ``base · minilm · k=3 (re-run 1)``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from t2exp.evaluation.reporting.runs import RunInfo, parse_overrides
from t2exp.evaluation.reporting.tables import swept_keys
from t2exp.infra.mlflow_store import Tag, cell_runs, child_runs

log = logging.getLogger(__name__)

SEP = " · "
_IN_BASE = ("rag_method", "embedder", "k")


def cell_name(method: str, embedder: str, k: str, extra: Sequence[tuple[str, str]] = ()) -> str:
    """``bm25f · minilm · k=3`` and ``key=value`` for each of ``extra`` (the last part of a
    dotted key: ``dataset.corpus_size`` -> ``corpus_size``)."""
    parts = [method, embedder, f"k={k}", *(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in extra)]
    return SEP.join(parts)


def rerun_name(name: str, earlier: int | str | None) -> str:
    """``name (re-run 2)`` for a cell with ``earlier`` runs before this one in its experiment."""
    return f"{name} (re-run {earlier})" if earlier and str(earlier) != "0" else name


def earlier_runs(client: Any, experiment_id: str, key: str) -> int:
    """How many runs the cell ``key`` has in the experiment already (a skipped cell's copy in a
    later sweep, ``resume=true``, is none)."""
    return sum(1 for r in cell_runs(client, experiment_id, key) if Tag.RESUMED_FROM not in r.data.tags)


def swept_values() -> list[tuple[str, str]]:
    """In a job of a sweep of Hydra's basic sweeper: ``(key, this job's value)`` for each key the
    sweep's jobs differ in (as :func:`sweep_names` picks them; not those every name shows). []
    outside one, and for another sweeper: the sweep's end names its cells."""
    from hydra.core.hydra_config import HydraConfig

    from t2exp.infra.hydra_internals import expected_jobs

    if not HydraConfig.initialized() or str(HydraConfig.get().mode) != "RunMode.MULTIRUN":
        return []
    hc = HydraConfig.get()
    jobs = [RunInfo(str(n), "", {}, {}, parse_overrides(" ".join(job))) for n, job in enumerate(expected_jobs(Path(hc.sweep.dir)))]
    mine = parse_overrides(" ".join(hc.overrides.task))
    return [(k, mine.get(k, "-")) for k in swept_keys(jobs) if k not in _IN_BASE]


def sweep_names(runs: Sequence[RunInfo]) -> dict[str, str]:
    """``{run_id: name}``: each run's :func:`cell_name` with the keys the runs differ in
    (:func:`t2exp.evaluation.reporting.tables.swept_keys`, the report's rows); runs that still
    share a name get their run id's first 6 characters."""
    keys = [k for k in swept_keys(runs) if k not in _IN_BASE]
    names = {r.run_id: cell_name(r.label("rag_method"), r.label("embedder"), r.label("k"), [(k, r.label(k)) for k in keys]) for r in runs}
    seen = list(names.values())
    return {rid: (n if seen.count(n) == 1 else f"{n}{SEP}{rid[:6]}") for rid, n in names.items()}


def name_sweep_cells(client: Any, parent_id: str) -> dict[str, str]:
    """Renames the child runs of the sweep ``parent_id`` to :func:`sweep_names` (every child,
    finished or not, so the names tell all of them apart; a re-run stays one). Returns the new names."""
    children = child_runs(client, parent_id)
    plain = sweep_names([RunInfo.from_mlflow(c) for c in children])
    names = {c.info.run_id: rerun_name(plain[c.info.run_id], c.data.tags.get(Tag.RERUN)) for c in children}
    for c in children:
        if c.data.tags.get("mlflow.runName") != names[c.info.run_id]:
            client.set_tag(c.info.run_id, "mlflow.runName", names[c.info.run_id])
    return names
