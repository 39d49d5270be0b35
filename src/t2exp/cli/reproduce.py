"""``t2exp reproduce`` (until it is wired: ``python -m t2exp.cli.reproduce``): run the conditions of
the expected-numbers files and say, metric by metric, whether today's code still gives them.

The expected numbers are data: one YAML file per table in ``expected/`` (the format and its
loader: :mod:`t2exp.evaluation.expected`; ``--expected DIR`` for another folder).

Each condition runs as a real ``python -m t2exp <overrides>`` subprocess in its own working
directory under a temporary folder (``--keep DIR`` keeps them), with its own cache: only the
embedding and LLM caches are carried from one condition to the next (they are keyed by model and
text, not by code), so a code change can never be hidden by a reused index or resumed predictions.
The measured value of ``<subset>/<metric>`` is the run's ``metrics.json`` artifact (full precision),
else the MLflow metric of that name. One line per metric: ``OK`` or ``FAIL`` with the measured and
the expected value; exit status 0 when every metric is within its tolerance, 1 when one is not,
2 when a run fails or the selection is wrong.

    python -m t2exp.cli.reproduce --list                  # every condition, its cost and its command
    python -m t2exp.cli.reproduce --ci                    # what CI runs (seconds)
    python -m t2exp.cli.reproduce --cheap                 # every retrieval-only condition (18 min on 2 cores)
    python -m t2exp.cli.reproduce reproduction            # one table
    python -m t2exp.cli.reproduce ladder/l4_priors        # one condition
    python -m t2exp.cli.reproduce --all --print-commands  # the commands, run nothing
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2exp.evaluation.expected import Condition, ExpectedError, Table, default_expected_dir, load_tables, select

PROG = "t2exp reproduce"
# the caches a condition inherits from the one before it (keyed by model + text, not by code)
CARRIED_CACHES = ("embeddings.sqlite", "llm.sqlite")
_RUN_ID = re.compile(r"MLflow run ([0-9a-f]{32})\b")


# --- a run and its metrics ------------------------------------------------------------------------
def _copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite file, whatever its writer left in the WAL."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(dst.name + ".partial")
    partial.unlink(missing_ok=True)
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
    from mlflow.tracking import MlflowClient

    return dict(MlflowClient(tracking_uri=f"sqlite:///{db}").get_run(run_id).data.metrics)


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


def run_condition(cond: Condition, work: Path, *, python: str, carried: Path | None, models: Path | None,
                  timeout: float | None) -> RunResult:
    """``python -m t2exp <overrides>`` in ``work`` (its own outputs and cache) and the metrics it logged."""
    work.mkdir(parents=True, exist_ok=True)
    cache = work / ".t2exp_cache"
    if carried is not None:
        carry_caches(carried, cache)
    extra = [f"paths.models={models}"] if models is not None else []
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("T2EXP_PROGRESS", "0")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, "-m", "t2exp", *cond.overrides, *extra], cwd=work, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = 124
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        out += f"\n{PROG}: stopped after --timeout {timeout:g} s"
    seconds = time.perf_counter() - t0
    with (work / "t2exp.log").open("w", encoding="utf-8") as f:
        f.write(out)
    measured: dict[str, float | None] = dict.fromkeys(cond.expected)
    if rc == 0:
        ids = _RUN_ID.findall(out)
        run_id = ids[-1] if ids else None
        mj = _metrics_json(work, run_id)
        measured = {k: lookup(mj, k) for k in cond.expected}
        if any(v is None for v in measured.values()):
            logged = _mlflow_metrics(work, run_id)
            measured = {k: v if v is not None else logged.get(k) for k, v in measured.items()}
    tail = "\n".join(out.strip().splitlines()[-15:])
    return RunResult(cond, work, seconds, rc, measured, tail)


# --- the verdicts ---------------------------------------------------------------------------------
def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}".rstrip("0").rstrip(".") if not math.isnan(x) else "nan"


def verdicts(result: RunResult) -> list[tuple[str, str]]:
    """``(status, line)`` per expected metric: OK or FAIL with the measured and expected value."""
    cond = result.condition
    lines: list[tuple[str, str]] = []
    width = max(len(k) for k in cond.expected)
    for key, want in cond.expected.items():
        got = result.measured.get(key)
        tol = cond.tolerance[key]
        if got is None or math.isnan(got):
            status, why = "FAIL", "  (not logged by the run)"
        else:
            diff = got - want
            status = "OK" if abs(diff) <= tol + 1e-9 else "FAIL"
            why = "" if status == "OK" else f"  (off by {diff:+.4g})"
        lines.append((status, f"{status:<4}  {key:<{width}}  measured {_fmt(got):>8}  expected {_fmt(want):>8} ± {_fmt(tol)}{why}"))
    return lines


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run conditions of the expected-numbers files (expected/*.yaml) and print OK/FAIL per metric.",
        epilog="Selections add up: `reproduction ladder/l4_priors --ci`. Exit 0: every metric within its tolerance; "
               "1: a FAIL; 2: a run failed or nothing was selected.",
    )
    p.add_argument("names", nargs="*", metavar="TABLE|TABLE/CONDITION|CONDITION", help="what to run")
    p.add_argument("--all", action="store_true", help="every condition of every table (many hours on a CPU)")
    p.add_argument("--cheap", action="store_true", help="every retrieval-only condition (generator=none)")
    p.add_argument("--ci", action="store_true", help="the conditions CI runs (seconds)")
    p.add_argument("--list", action="store_true", help="list the tables and conditions, run nothing")
    p.add_argument("--print-commands", action="store_true",
                   help="print each selected condition's command and expected metrics, run nothing")
    p.add_argument("--expected", type=Path, help="folder of expected-numbers files (default: expected/ of the checkout)")
    p.add_argument("--keep", type=Path, metavar="DIR", help="run under DIR and keep each run's outputs (default: a temporary folder)")
    p.add_argument("--cache-from", type=Path, metavar="CACHE",
                   help="start from the embedding and LLM caches of this paths.cache (e.g. ./.t2exp_cache); read only")
    p.add_argument("--models", type=Path, metavar="DIR",
                   help="paths.models of every run: converted offline generators are reused from and kept in DIR")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds one run may take (default: no limit)")
    p.add_argument("--python", default=sys.executable, help="the interpreter that runs python -m t2exp (default: this one)")
    return p


def _list(tables: Sequence[Table]) -> None:
    for t in tables:
        cost = "retrieval only" if t.retrieval_only else "with a generator"
        print(f"{t.name}: {t.title} ({len(t.conditions)} conditions, {cost})")
        for c in t.conditions:
            flags = " [ci]" if c.ci else ""
            print(f"  {c.key}{flags}: {c.command()}")


def _print_commands(conds: Sequence[Condition]) -> None:
    for c in conds:
        want = ", ".join(f"{k} {_fmt(v)} ± {_fmt(c.tolerance[k])}" for k, v in c.expected.items())
        print(f"# {c.key}: {want}")
        print(c.command())


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """The command (``prog`` names it in its messages); its exit status."""
    args = build_parser(prog).parse_args(argv)
    try:
        tables = load_tables(args.expected or default_expected_dir())
        if args.list:
            _list(tables)
            return 0
        conds = select(tables, args.names, every=args.all, cheap=args.cheap, ci=args.ci)
    except ExpectedError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if not conds:
        print(f"{prog}: error: nothing selected: name a table or condition, or give --ci, --cheap or --all (--list shows them)",
              file=sys.stderr)
        return 2
    if args.print_commands:
        _print_commands(conds)
        return 0
    args.prog = prog
    return _run(conds, args)


def _run(conds: Sequence[Condition], args: argparse.Namespace) -> int:
    root = args.keep or Path(tempfile.mkdtemp(prefix="t2exp-reproduce-"))
    root.mkdir(parents=True, exist_ok=True)
    carried: Path | None = args.cache_from
    models = args.models or root / "models"
    n_ok = n_fail = n_error = 0
    try:
        for i, cond in enumerate(conds, 1):
            print(f"[{i}/{len(conds)}] {cond.key}: {cond.command()}", flush=True)
            work = root / cond.table / cond.name
            if work.exists():
                shutil.rmtree(work)
            result = run_condition(cond, work, python=args.python, carried=carried, models=models, timeout=args.timeout)
            if result.returncode != 0:
                n_error += 1
                print(f"ERROR  the run ended with exit status {result.returncode} after {result.seconds:.0f} s; its last lines:")
                print("\n".join(f"       {line}" for line in result.output_tail.splitlines()), flush=True)
                continue
            carried = work / ".t2exp_cache"
            print(f"       ran {result.seconds:.1f} s")
            for status, line in verdicts(result):
                n_ok += status == "OK"
                n_fail += status == "FAIL"
                print(f"  {line}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"outputs kept under {root} (each condition's t2exp.log, mlruns/ and cache)")
    print(f"{args.prog}: {len(conds)} condition(s), {n_ok + n_fail} metric(s): {n_ok} OK, {n_fail} FAIL"
          + (f", {n_error} run(s) failed" if n_error else ""))
    return 2 if n_error else (1 if n_fail else 0)


if __name__ == "__main__":
    sys.exit(main())
