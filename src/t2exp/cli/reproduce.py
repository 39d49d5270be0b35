"""``t2exp reproduce`` (until it is wired: ``python -m t2exp.cli.reproduce``): run the conditions of
the expected-numbers files and say, metric by metric, whether today's code still gives them.

The expected numbers are data, one YAML file per table in ``expected/`` at the repository root
(``--expected DIR`` for another folder). Each file lists conditions: a name, the overrides of one
``python -m t2exp`` run, the metrics it is expected to log and a tolerance (in the metric's own
unit, percentage points). A file looks like this::

    title: The default run's retrieval
    command: python -m t2exp generator=none      # how the table was made, for the reader
    measured: 2026-12-04, 2 CPU cores            # when and where (shown in the docs)
    checked: "2026-12-04, every metric OK"       # the last full t2exp reproduce of the file (shown in the docs)
    retrieval_only: true                         # no generator: a cheap condition (--cheap)
    tolerance: 0.1                               # default for every metric of every condition
    metrics: {avg/mrr_at_3: Avg MRR@3, avg/recall_at_1: Avg R@1}   # the columns, in order
    conditions:
      - name: default-retrieval
        overrides: [generator=none]
        ci: true                                 # CI runs it (tests/test_reproduce.py)
        expected: {avg/mrr_at_3: 95.8, avg/recall_at_1: 91.7}
        intervals: {avg/mrr_at_3: [87.5, 100.0]} # 95 % CIs, shown in the docs, not checked

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
    python -m t2exp.cli.reproduce --cheap                 # every retrieval-only condition (about an hour on 2 cores)
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
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROG = "t2exp reproduce"
# the caches a condition inherits from the one before it (keyed by model + text, not by code)
CARRIED_CACHES = ("embeddings.sqlite", "llm.sqlite")
_RUN_ID = re.compile(r"MLflow run ([0-9a-f]{32})\b")


class ExpectedError(Exception):
    """A malformed expected-numbers file or a selection that names nothing."""


@dataclass
class Condition:
    """One row of a table: the overrides of one run and the metrics it is expected to log."""

    table: str
    name: str
    overrides: list[str]
    expected: dict[str, float]
    tolerance: dict[str, float]
    label: str = ""
    retrieval_only: bool = False
    ci: bool = False
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.table}/{self.name}"

    def command(self, python: str = "python") -> str:
        return " ".join([python, "-m", "t2exp", *(shlex.quote(o) for o in self.overrides)])


@dataclass
class Table:
    """One expected-numbers file."""

    name: str
    path: Path
    title: str
    description: str
    command: str
    measured: str
    checked: str
    retrieval_only: bool
    minutes: float | None
    metrics: dict[str, str]
    conditions: list[Condition]


# --- the files ------------------------------------------------------------------------------------
def default_expected_dir() -> Path:
    """``expected/`` next to the configs the app reads (the checkout's, or a package's copy)."""
    from t2exp.infra import paths

    for root in (paths.RESOURCE_ROOT, paths.CHECKOUT_ROOT):
        if root is not None and (root / "expected").is_dir():
            return root / "expected"
    return paths.RESOURCE_ROOT / "expected"


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExpectedError(f"{where}: {value!r} is not a number")
    return float(value)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExpectedError(f"{where}: a mapping of metric -> value, not {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _tolerances(raw: Any, expected: dict[str, float], default: float, where: str) -> dict[str, float]:
    """One number for every metric, or a mapping metric -> number (the file's default for the others)."""
    if isinstance(raw, dict):
        per = {str(k): _number(v, f"{where}: tolerance {k}") for k, v in raw.items()}
        tolerance = {k: per.get(k, default) for k in expected}
    else:
        tolerance = dict.fromkeys(expected, _number(raw, f"{where}: tolerance"))
    if any(t < 0 for t in tolerance.values()):
        raise ExpectedError(f"{where}: a tolerance is negative")
    return tolerance


def _intervals(raw: Any, where: str) -> dict[str, tuple[float, float]]:
    intervals: dict[str, tuple[float, float]] = {}
    for k, v in _mapping(raw, f"{where}: intervals").items():
        if not isinstance(v, list) or len(v) != 2:
            raise ExpectedError(f"{where}: intervals {k} is [low, high]")
        intervals[k] = (_number(v[0], f"{where}: intervals {k}"), _number(v[1], f"{where}: intervals {k}"))
    return intervals


def _condition(raw: Any, table: str, where: str, default_tol: float, retrieval_only: bool) -> Condition:
    """One entry of a file's ``conditions``, checked."""
    if not isinstance(raw, dict) or not raw.get("name"):
        raise ExpectedError(f"{where}: a mapping with a `name`")
    name = str(raw["name"])
    where = f"{where.rsplit(': ', 1)[0]}: condition {name!r}"
    overrides = raw.get("overrides")
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ExpectedError(f"{where}: `overrides` is a list of strings (the run's command-line overrides)")
    expected = {k: _number(v, f"{where}: expected {k}") for k, v in _mapping(raw.get("expected"), f"{where}: expected").items()}
    if not expected:
        raise ExpectedError(f"{where}: no `expected` metrics")
    return Condition(
        table=table, name=name, overrides=list(overrides), expected=expected,
        tolerance=_tolerances(raw.get("tolerance", default_tol), expected, default_tol, where),
        label=str(raw.get("label", name)), retrieval_only=bool(raw.get("retrieval_only", retrieval_only)),
        ci=bool(raw.get("ci", False)), intervals=_intervals(raw.get("intervals"), where), note=str(raw.get("note", "")),
    )


def load_table(path: Path) -> Table:
    """Read and check one expected-numbers file."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ExpectedError(f"{path}: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("conditions"), list) or not doc["conditions"]:
        raise ExpectedError(f"{path}: a mapping with a non-empty list `conditions`")
    default_tol = _number(doc.get("tolerance", 0.1), f"{path}: tolerance")
    retrieval_only = bool(doc.get("retrieval_only", False))
    conditions = [_condition(raw, path.stem, f"{path}: conditions[{i}]", default_tol, retrieval_only)
                  for i, raw in enumerate(doc["conditions"])]
    names = [c.name for c in conditions]
    for name in {n for n in names if names.count(n) > 1}:
        raise ExpectedError(f"{path}: condition {name!r}: a second condition of that name")
    metrics = {str(k): str(v) for k, v in _mapping(doc.get("metrics"), f"{path}: metrics").items()}
    for c in conditions:
        for key in c.expected:
            metrics.setdefault(key, key)
    minutes = doc.get("minutes")
    return Table(
        name=path.stem, path=path, title=str(doc.get("title", path.stem)), description=str(doc.get("description", "")).strip(),
        command=str(doc.get("command", "")).strip(), measured=str(doc.get("measured", "")).strip(),
        checked=str(doc.get("checked", "")).strip(),
        retrieval_only=retrieval_only, minutes=None if minutes is None else _number(minutes, f"{path}: minutes"),
        metrics=metrics, conditions=conditions,
    )


def load_tables(expected_dir: Path) -> list[Table]:
    """Every ``*.yaml`` of the folder, sorted by name."""
    if not expected_dir.is_dir():
        raise ExpectedError(f"{expected_dir}: no such folder of expected-numbers files (--expected DIR)")
    tables = [load_table(p) for p in sorted(expected_dir.glob("*.yaml"))]
    if not tables:
        raise ExpectedError(f"{expected_dir}: no *.yaml expected-numbers files")
    return tables


def select(tables: Sequence[Table], names: Sequence[str], *, every: bool = False, cheap: bool = False,
           ci: bool = False) -> list[Condition]:
    """The conditions named (``table``, ``table/condition`` or a condition name found in one table
    only), plus every one (``every``), the retrieval-only ones (``cheap``) or CI's (``ci``)."""
    everything = [c for t in tables for c in t.conditions]
    chosen: list[Condition] = []

    def add(items: Iterable[Condition]) -> None:
        for c in items:
            if c not in chosen:
                chosen.append(c)

    by_table = {t.name: t for t in tables}
    for name in names:
        if name in by_table:
            add(by_table[name].conditions)
            continue
        hits = [c for c in everything if c.key == name] or [c for c in everything if c.name == name]
        if not hits:
            raise ExpectedError(f"{name!r}: no such table or condition (--list shows them)")
        if len(hits) > 1:
            raise ExpectedError(f"{name!r}: a condition of {len(hits)} tables; name one: {', '.join(c.key for c in hits)}")
        add(hits)
    if every:
        add(everything)
    if cheap:
        add(c for c in everything if c.retrieval_only)
    if ci:
        add(c for c in everything if c.ci)
    return chosen


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
