"""One condition of the expected-numbers files run as a real ``python -m t2exp <overrides>``
subprocess in its own working directory, with its own cache: only the embedding and LLM caches are
carried from one condition to the next (keyed by model and text, not by code), so a code change
can never be hidden by a reused index or resumed predictions. The measured value of
``<subset>/<metric>`` is the run's ``metrics.json`` artifact (full precision), else the MLflow
metric of that name."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2exp.evaluation.expected import Condition
from t2exp.infra.contained import remove_file
from t2exp.infra.signals import PassOnToChild as Signals
from t2exp.infra.signals import stop_process
from t2exp.pipeline.stop import stop_grace

PROG = "t2exp reproduce"
# the caches a condition inherits from the one before it (keyed by model + text, not by code)
CARRIED_CACHES = ("embeddings.sqlite", "llm.sqlite")
QUALITY_CRITERIA_TAG = "mlflow.genaiEvaluate.qualityCriteria"  # MLflow 3.18's mlflow_tags.MLFLOW_GENAI_EVALUATE_QUALITY_CRITERIA
_RUN_ID = re.compile(r"MLflow run ([0-9a-f]{32})\b")


def _copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite file, whatever its writer left in the WAL."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(dst.name + ".partial")
    remove_file(partial, dst.parent, missing_ok=True)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as a, sqlite3.connect(partial) as b:
        a.backup(b)
    partial.replace(dst)


def carry_caches(src: Path, dst: Path) -> None:
    """The embedding and LLM caches of ``src`` (a ``paths.cache``) into ``dst``."""
    for name in CARRIED_CACHES:
        if (src / name).is_file():
            try:
                _copy_sqlite(src / name, dst / name)
            except sqlite3.Error as exc:  # a damaged or foreign file: start without it
                print(f"{PROG}: not carrying {src / name} ({exc})", file=sys.stderr)


def _metrics_json(work: Path, run_id: str | None) -> dict[str, Any]:
    found = sorted(work.glob(f"mlruns/**/{run_id or '*'}/artifacts/metrics.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        found = sorted(work.glob("mlruns/**/metrics.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return {}
    data = json.loads(found[-1].read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _mlflow_metrics(work: Path, run_id: str | None) -> dict[str, float]:
    db = work / "mlruns" / "mlflow.db"
    if run_id is None or not db.is_file():
        return {}
    from t2exp.infra.mlflow_store import open_client

    return dict(open_client(f"sqlite:///{db}", create=False).get_run(run_id).data.metrics)


def record_criteria(db: Path, run_id: str, cond: Condition) -> None:
    """The tolerances of ``cond`` on the run they check, as MLflow's quality criteria (the run tag
    its evaluation-runs page reads): each expected ``<subset>/<metric>`` ``>= expected - tolerance``
    and ``<= expected + tolerance``. MLflow before 3.18 has no such tag: nothing is recorded."""
    try:  # MLflow's own rule and tag format (metric key: "<scorer>/<aggregation>", here "<subset>/<metric>")
        from mlflow.genai.evaluation.quality_criteria import QualityCriteriaRule, build_quality_criteria_tag
    except ImportError:
        return
    from t2exp.infra.mlflow_store import open_client

    rules = []
    for key, want in cond.expected.items():
        scope, _, metric = key.partition("/")
        tol = cond.tolerance[key]
        if metric:
            rules += [QualityCriteriaRule(scope, metric, ">=", want - tol), QualityCriteriaRule(scope, metric, "<=", want + tol)]
    if rules:
        open_client(f"sqlite:///{db}", create=False).set_tag(run_id, QUALITY_CRITERIA_TAG, build_quality_criteria_tag(rules))


def lookup(metrics_json: dict[str, Any], name: str) -> float | None:
    """``<subset or avg>/<metric>`` in a run's ``metrics.json`` (``{subset: {metric: {mean, ...}}}``)."""
    scope, _, metric = name.partition("/")
    entry = metrics_json.get(scope, {}).get(metric) if metric else None
    if isinstance(entry, dict) and isinstance(entry.get("mean"), (int, float)):
        return float(entry["mean"])
    if isinstance(entry, (int, float)) and not isinstance(entry, bool):
        return float(entry)
    return None


@dataclass
class RunResult:
    condition: Condition
    work: Path
    seconds: float
    returncode: int
    measured: dict[str, float | None]
    output_tail: str = ""


# After --timeout the run is asked to stop as on a Ctrl-C; it gets its own stop grace
# ($T2EXP_STOP_GRACE_SECONDS) plus this long to close its MLflow run before it is killed.
TIMEOUT_CLOSE_SECONDS = 60.0


def stop_child(proc: subprocess.Popen[bytes], grace: float) -> str:
    """SIGTERM to the run alone first: it stops as it does on a Ctrl-C (the requests in flight
    finish, its MLflow run is closed KILLED); SIGKILL to it and every process it started only if
    it is still there ``grace`` seconds later (its MLflow run may then stay RUNNING). What
    happened, in words."""
    if stop_process(proc, grace, term_group=False) is signal.SIGKILL:
        return f"SIGTERM, then SIGKILL {grace:g} s later; its MLflow run may be left RUNNING"
    return f"SIGTERM; the run ended with exit status {proc.returncode}"


def _child(cmd: list[str], work: Path, env: dict[str, str], log: Any, timeout: float | None, signals: Signals | None) -> int:
    """Run ``cmd`` in ``work`` with its output into ``log``; its exit status (124: ``timeout``)."""
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, process_group=0)
    if signals is not None:
        signals.child = proc
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        how = stop_child(proc, stop_grace() + TIMEOUT_CLOSE_SECONDS)
        log.write(f"\n{PROG}: stopped after --timeout {timeout:g} s ({how})\n".encode())
        return 124
    finally:
        if signals is not None:
            signals.child = None


def run_condition(
    cond: Condition,
    work: Path,
    *,
    python: str,
    carried: Path | None,
    models: Path | None,
    timeout: float | None,
    signals: Signals | None = None,
) -> RunResult:
    """``python -m t2exp <overrides>`` in ``work`` (its own outputs and cache; its output streamed
    to ``work/t2exp.log``) and the metrics it logged."""
    work.mkdir(parents=True, exist_ok=True)
    cache = work / ".t2exp_cache"
    if carried is not None:
        carry_caches(carried, cache)
    extra = [f"paths.models={models}"] if models is not None else []
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # the run starts in `work`: a relative entry would find other code there, or none
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("T2EXP_PROGRESS", "0")
    t0 = time.perf_counter()
    with (work / "t2exp.log").open("wb") as log:
        rc = _child([python, "-m", "t2exp", *cond.overrides, *extra], work, env, log, timeout, signals)
    seconds = time.perf_counter() - t0
    out = (work / "t2exp.log").read_text(encoding="utf-8", errors="replace")
    measured: dict[str, float | None] = dict.fromkeys(cond.expected)
    if rc == 0:
        ids = _RUN_ID.findall(out)
        run_id = ids[-1] if ids else None
        if run_id is not None and (work / "mlruns" / "mlflow.db").is_file():
            record_criteria(work / "mlruns" / "mlflow.db", run_id, cond)
        mj = _metrics_json(work, run_id)
        measured = {k: lookup(mj, k) for k in cond.expected}
        if any(v is None for v in measured.values()):
            logged = _mlflow_metrics(work, run_id)
            measured = {k: v if v is not None else logged.get(k) for k, v in measured.items()}
    tail = "\n".join(out.strip().splitlines()[-15:])
    return RunResult(cond, work, seconds, rc, measured, tail)
