"""``t2exp reproduce`` (also ``python -m t2exp.cli.reproduce``): run conditions of the
expected-numbers files (``expected/*.yaml``: :mod:`t2exp.evaluation.expected`; ``--expected DIR``
for another folder) and print OK or FAIL per metric, with the measured and the expected value
(docs/reproduction.md). Each condition runs as a ``python -m t2exp`` subprocess
(:mod:`t2exp.cli.reproduce_run`) under a temporary folder (``--keep DIR`` keeps them). Exit status
0 when every metric is within its tolerance, 1 when one is not, 2 when a run fails or the
selection is wrong.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from t2exp.cli.reproduce_run import PROG, RunResult, run_condition
from t2exp.errors import T2ExpError, command_error
from t2exp.evaluation.expected import Condition, ExpectedError, ExpectedTable, default_expected_dir, load_tables, select
from t2exp.infra.contained import inside, remove_tree
from t2exp.infra.signals import Interrupted, signal_exit_status
from t2exp.infra.signals import PassOnToChild as Signals


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


def _list(tables: Sequence[ExpectedTable]) -> None:
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
        return command_error(prog, exc)
    if not conds:
        return command_error(prog, "nothing selected: name a table or condition, or give --ci, --cheap or --all (--list shows them)")
    if args.print_commands:
        _print_commands(conds)
        return 0
    problem = _check_paths(args, conds)
    if problem:
        return command_error(prog, problem)
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
    except (OSError, T2ExpError) as exc:  # --keep not writable, a full disk; OutsideRoot: nothing was removed
        return command_error(args.prog, exc)
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
