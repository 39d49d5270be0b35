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
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2exp.errors import T2ExpError, os_error_line
from t2exp.evaluation.expected import Condition, ExpectedError, Table, default_expected_dir, load_tables, select
from t2exp.infra.contained import inside, remove_file, remove_tree
from t2exp.infra.signals import Interrupted, signal_exit_status, stop_process
from t2exp.infra.signals import PassOnToChild as Signals
from t2exp.pipeline.stop import stop_grace

PROG = "t2exp reproduce"
# the caches a condition inherits from the one before it (keyed by model + text, not by code)
CARRIED_CACHES = ("embeddings.sqlite", "llm.sqlite")
_RUN_ID = re.compile(r"MLflow run ([0-9a-f]{32})\b")


# --- a run and its metrics ------------------------------------------------------------------------
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
    p.add_argument(
        "--print-commands", action="store_true", help="print each selected condition's command and expected metrics, run nothing"
    )
    p.add_argument("--expected", type=Path, help="folder of expected-numbers files (default: expected/ of the checkout)")
    p.add_argument("--keep", type=Path, metavar="DIR", help="run under DIR and keep each run's outputs (default: a temporary folder)")
    p.add_argument(
        "--cache-from",
        type=Path,
        metavar="CACHE",
        help="start from the embedding and LLM caches of this paths.cache (e.g. ./.t2exp_cache); read only",
    )
    p.add_argument(
        "--models", type=Path, metavar="DIR", help="paths.models of every run: converted offline generators are reused from and kept in DIR"
    )
    p.add_argument("--timeout", metavar="S", help="seconds one run may take, a positive number (default: no limit)")
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
        print(
            f"{prog}: error: nothing selected: name a table or condition, or give --ci, --cheap or --all (--list shows them)",
            file=sys.stderr,
        )
        return 2
    if args.print_commands:
        _print_commands(conds)
        return 0
    problem = _check_paths(args, conds)
    if problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return 2
    args.prog, args.timeout = prog, None if args.timeout is None else _seconds(args.timeout)
    return _run(conds, args)


def _seconds(text: str) -> float | None:
    """``--timeout``'s value: a positive finite number of seconds, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _check_paths(args: argparse.Namespace, conds: Sequence[Condition]) -> str | None:
    """The interpreter, ``--keep`` and ``--timeout``, checked before anything runs: the one-line
    error, or None."""
    if args.timeout is not None and _seconds(args.timeout) is None:
        return f"--timeout {args.timeout!r} is invalid; allowed: a positive finite number of seconds (e.g. 600)"
    if shutil.which(str(args.python)) is None:
        return (
            f"--python {args.python}: no such interpreter (not found, or not executable); "
            "give the path of a Python that has t2exp installed"
        )
    if args.keep is not None and args.keep.exists() and not args.keep.is_dir():
        return f"--keep {args.keep}: a file, not a folder; give a folder to keep the outputs in (it is made when missing)"
    keep = args.keep
    links = [] if keep is None else [p for c in conds for p in (keep / c.table, keep / c.table / c.name) if p.is_symlink()]
    if links:  # never followed, never deleted: a folder of the run is replaced before it runs
        return (
            f"--keep {args.keep}: {links[0]} is a symbolic link (to {os.readlink(links[0])}); t2exp does not follow "
            "or delete links under --keep: remove the link, or give another --keep folder"
        )
    return None


def _run(conds: Sequence[Condition], args: argparse.Namespace) -> int:
    """Every condition under one root (``--keep`` or a temporary folder); the exit status."""
    signals = Signals()
    restore = signals.install()
    root: Path | None = None
    try:
        root = args.keep or Path(tempfile.mkdtemp(prefix="t2exp-reproduce-"))
        root.mkdir(parents=True, exist_ok=True)
        n_ok, n_fail, n_error = _run_all(conds, args, root, signals)
    except Interrupted as exc:
        kept = f"outputs kept under {root}" if args.keep else "the temporary folder was removed (--keep DIR keeps the outputs)"
        print(f"{args.prog}: interrupted by {exc}; {kept}", file=sys.stderr)
        return exc.exit_status
    except OSError as exc:  # --keep not writable, a full disk, an interpreter that cannot be started
        print(f"{args.prog}: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except T2ExpError as exc:  # a folder outside the root (OutsideRoot): nothing was removed
        print(f"{args.prog}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        restore()
        if root is not None and args.keep is None:
            remove_tree(root, tempfile.gettempdir(), ignore_errors=True)
    if args.keep is not None:
        print(f"outputs kept under {root} (each condition's t2exp.log, mlruns/ and cache)")
    print(
        f"{args.prog}: {len(conds)} condition(s), {n_ok + n_fail} metric(s): {n_ok} OK, {n_fail} FAIL"
        + (f", {n_error} run(s) failed" if n_error else "")
    )
    return 2 if n_error else (1 if n_fail else 0)


def _run_all(conds: Sequence[Condition], args: argparse.Namespace, root: Path, signals: Signals) -> tuple[int, int, int]:
    """Run the conditions in turn under ``root``; the numbers of OK and FAIL metrics and failed runs."""
    carried: Path | None = args.cache_from
    models = args.models or root / "models"
    n_ok = n_fail = n_error = 0
    for i, cond in enumerate(conds, 1):
        print(f"[{i}/{len(conds)}] {cond.key}: {cond.command()}", flush=True)
        work = inside(root / cond.table / cond.name, root)  # names are plain segments (expected.py); checked again
        if work.exists():
            remove_tree(work, root)
        result = run_condition(cond, work, python=args.python, carried=carried, models=models, timeout=args.timeout, signals=signals)
        if signals.received is not None:
            how = " (its MLflow run closed as KILLED)" if result.returncode == signal_exit_status(signals.received) else ""
            raise Interrupted(
                signals.received, f"passed on to the run of {cond.key}, which stopped with exit status {result.returncode}{how}"
            )
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
    return n_ok, n_fail, n_error


if __name__ == "__main__":
    sys.exit(main())
