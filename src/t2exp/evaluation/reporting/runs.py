"""Report, read: the MLflow runs of a sweep (a parent run's children) or of an experiment."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from t2exp.errors import T2ExpError
from t2exp.infra.mlflow_store import Tag, child_runs, search_all

GROUPS = ("dataset", "embedder", "store", "rag_method", "generator", "reranker", "protocol")
RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_SKIP_OVERRIDE = re.compile(r"^(hydra|paths|tracking)\.|^(experiment|resume|experiment_name|shards?)$")


class ReportError(T2ExpError):
    pass


@dataclass
class RunInfo:
    run_id: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    overrides: dict[str, str]
    start_time: int = 0

    @classmethod
    def from_mlflow(cls, run: Any) -> RunInfo:
        tags = run.data.tags
        return cls(
            run_id=run.info.run_id,
            name=tags.get("mlflow.runName", run.info.run_id[:8]),
            params=dict(run.data.params),
            metrics=dict(run.data.metrics),
            overrides=parse_overrides(tags.get(Tag.OVERRIDES, "")),
            start_time=int(run.info.start_time or 0),
        )

    def label(self, key: str) -> str:
        if key == "run":
            return self.run_id[:8]
        if key in self.params:
            return "null" if self.params[key] == "None" else self.params[key]
        if key in GROUPS and f"{key}.name" in self.params:
            return self.params[f"{key}.name"]
        if key in self.overrides:
            return self.overrides[key]
        return "-"


def parse_overrides(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.split():
        if "=" not in token:
            continue
        key, value = token.split("=", 1)
        key = key.lstrip("+~")
        if "@" in key:  # group@package=option
            key = key.split("@", 1)[0]
        if not _SKIP_OVERRIDE.search(key):
            out[key] = value
    return out


@dataclass
class Target:
    title: str
    experiment_id: str
    parent_id: str | None
    runs: list[RunInfo]
    notes: list[str] = field(default_factory=list)


def _newest_per_cell(runs: list[Any]) -> list[Any]:
    keep: dict[str, Any] = {}
    for r in runs:
        key = r.data.tags.get(Tag.CELL_KEY) or r.info.run_id
        if key not in keep or (r.info.start_time or 0) >= (keep[key].info.start_time or 0):
            keep[key] = r
    return sorted(keep.values(), key=lambda r: r.info.start_time or 0)


def _nothing_finished(client: Any, title: str, parent_id: str, exp_id: str, children: list[Any]) -> str:
    """The one line for a sweep none of whose cells finished (an empty report says nothing)."""
    statuses: dict[str, int] = {}
    for c in children:
        statuses[c.info.status] = statuses.get(c.info.status, 0) + 1
    experiment = client.get_experiment(exp_id).name
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    return (
        f"sweep {title!r} (parent run {parent_id}, experiment {experiment!r}): no cell finished ({counts}); nothing "
        f"to report: run the sweep again (with resume=true it goes on from the predictions made so far), then "
        f"report its new parent run or the experiment"
    )


def resolve_target(client: Any, target: str) -> Target:
    """A parent run id (its children) or an experiment name (its finished result runs)."""
    notes: list[str] = []
    if RUN_ID.match(target):
        try:
            parent = client.get_run(target)
        except Exception:  # not a run id after all: try it as an experiment name
            parent = None
        if parent is not None:
            exp_id = parent.info.experiment_id
            children = child_runs(client, target)
            if not children:
                raise ReportError(f"run {target} has no child runs; pass a sweep's parent run id or an experiment name")
            bad = [c for c in children if c.info.status != "FINISHED"]
            title = parent.data.tags.get("mlflow.runName", target)
            if len(bad) == len(children):
                raise ReportError(_nothing_finished(client, title, target, exp_id, bad))
            if bad:
                notes.append(
                    f"{len(bad)} child run(s) not FINISHED and left out: "
                    + ", ".join(f"{c.info.run_id[:8]} ({c.info.status})" for c in bad)
                )
            done = _newest_per_cell([c for c in children if c.info.status == "FINISHED"])
            return Target(f"{title} (parent run {target})", exp_id, target, [RunInfo.from_mlflow(r) for r in done], notes)
    exp = client.get_experiment_by_name(target)
    if exp is None:
        raise ReportError(f"{target!r} is neither a run id nor an MLflow experiment name at this tracking URI")
    runs = [
        r
        for r in search_all(client, exp.experiment_id)
        if r.info.status == "FINISHED"
        and r.data.tags.get(Tag.SWEEP) != "parent"
        and Tag.REPORT not in r.data.tags
        and Tag.SHARD not in r.data.tags
    ]  # a sharded cell's shard runs: the cell's run reports it
    if not runs:
        raise ReportError(
            f"experiment {target!r} has no FINISHED runs; nothing to report: run python -m t2exp there "
            "(tracking.experiment=...) until a run finishes, or name another experiment"
        )
    done = _newest_per_cell(runs)
    if len(done) < len(runs):
        notes.append(f"{len(runs) - len(done)} older run(s) of an already reported config cell left out (newest kept)")
    return Target(f"experiment {target}", exp.experiment_id, None, [RunInfo.from_mlflow(r) for r in done], notes)
