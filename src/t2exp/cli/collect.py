"""``t2exp collect TARGET...``: merge sharded cells whose shards have all finished — what the last
shard to finish does by itself — into each cell's ``predictions.jsonl``, ``metrics.json`` and one
FINISHED MLflow run (the shards' runs its children); a cell with a shard not finished, or with a
question missing or twice, is refused in one line naming the shard's file (exit 2).

TARGET is a cell's run directory (``<paths.cache>/runs/<cell key>``), a shard job's Hydra output
directory, a sweep directory (every sharded cell under it) or a sweep's MLflow parent run id
(its ``t2exp.sweep_dir``; ``--tracking-uri`` says where, default the app's ``tracking.uri``).

A sweep submitted without waiting (``hydra.launcher.wait=false``: its ``t2exp_jobs.json``) is
collected once every job has ended (``t2exp status``): its sharded cells merged, then its report
logged on the parent run, which is closed FINISHED (FAILED when a job failed). Before that, collect
says how many jobs are still pending or running and changes nothing.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from t2exp.cli.sweep_target import sweep_path
from t2exp.errors import DataError, T2ExpError, one_line, os_error_line
from t2exp.infra.mlflow_store import move_login

if TYPE_CHECKING:
    from omegaconf import DictConfig

log = logging.getLogger("t2exp")


def build_parser(prog: str = "t2exp collect") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Merge the finished shards of sharded cells (shards=N) into each cell's result.")
    p.add_argument("targets", nargs="+", metavar="TARGET", help="a cell's run dir, a shard job's or sweep's Hydra dir, or a parent run id")
    p.add_argument("--tracking-uri", type=move_login, help="where a parent run id is (default: the app config's tracking.uri)")
    return p


def cell_dirs(target: str, tracking_uri: str | None = None) -> list[Path]:
    """The run directories of the sharded cells ``target`` names (see the module's doc)."""
    from t2exp.pipeline.shards import CONFIG_FILE, POINTER_FILE, SHARDS_DIR, read_pointer

    path = sweep_path(target, tracking_uri)
    if (path / SHARDS_DIR / CONFIG_FILE).is_file():
        return [path]
    pointers = [path / POINTER_FILE] if (path / POINTER_FILE).is_file() else sorted(path.glob(f"*/{POINTER_FILE}"))
    found = dict.fromkeys(read_pointer(p)["run_dir"] for p in pointers)
    if not found:
        raise DataError(
            f"{target}: no sharded cell there (no {SHARDS_DIR}/{CONFIG_FILE}, no */{POINTER_FILE}); give a cell's run "
            "directory (<paths.cache>/runs/<cell key>), a shard job's or a sweep's Hydra directory, or a parent run id"
        )
    return list(found)


def collect(run_dir: Path) -> str:
    """Merge the cell in ``run_dir``; what was done, in one line."""
    from t2exp.infra.cache import cell_lock, lock_name, locks_dir
    from t2exp.pipeline.identity import load_cell
    from t2exp.pipeline.shard_merge import merge_cell
    from t2exp.pipeline.shards import Layout
    from t2exp.tracking.mlflow_run import finished_run_for

    cfg = _cell_config(run_dir)  # the cell's config as its shards saved it
    cell = load_cell(cfg)
    subsets, key = cell.subsets, cell.key
    if key != run_dir.name:
        raise DataError(
            f"{run_dir}: the data or the prompts changed since its shards ran (cell key now {key}); "
            "run the cell again (its shards resume) or restore them"
        )
    tr = cfg.tracking

    def waiting() -> None:
        log.warning("cell %s is being merged by another process (a shard or `t2exp collect`); waiting for it", key)

    with cell_lock(locks_dir(cfg.paths.cache), lock_name("cell", key), on_wait=waiting):  # the check and the merge as one
        done = finished_run_for(str(tr.uri), str(tr.experiment), tr.get("artifact_location"), key)
        if done is not None:
            return f"cell {key}: already FINISHED as MLflow run {done.info.run_id}; nothing to merge"
        result = merge_cell(cfg, [], Layout(run_dir, int(cfg.shards)), subsets, key, None)
    return f"cell {key}: merged {int(cfg.shards)} shards into MLflow run {result.run_id} ({result.predictions_path})"


def _cell_config(run_dir: Path) -> DictConfig:
    """The cell's config its shards saved (``shards/config.yaml``)."""
    from omegaconf import DictConfig, OmegaConf

    from t2exp.pipeline.shards import CONFIG_FILE, SHARDS_DIR

    path = run_dir / SHARDS_DIR / CONFIG_FILE
    try:
        cfg = OmegaConf.load(path)
        if not isinstance(cfg, DictConfig) or "shards" not in cfg:
            raise ValueError("not a mapping with shards")
    except OSError:
        raise
    except Exception as exc:
        raise DataError(
            f"{path}: not a cell's config in YAML, a damaged file ({one_line(exc, 80)}); run any shard of the cell again "
            "with resume=true (the same command with shard=0): it writes this file again, and the shards' answers are kept"
        ) from None
    return cfg


def collect_sweep(sweep_dir: Path, tracking_uri: str | None, prog: str) -> int:
    """A submit-and-return sweep: merge its sharded cells and close its parent run once every job
    has ended (see the module's doc); the exit status."""
    from t2exp.cli.status import load_sweep, table
    from t2exp.infra.mlflow_store import open_client, run_status
    from t2exp.tracking.callbacks import close_sweep

    sweep = load_sweep(sweep_dir, tracking_uri)
    if not sweep.ended():
        counts = sweep.counts()
        print(table(sweep))
        print(
            f"{prog}: {counts['pending'] + counts['running']} of {len(sweep.jobs)} jobs still pending or running; nothing "
            f"collected yet: run `t2exp collect {sweep_dir}` again when `t2exp status` shows them ended",
            file=sys.stderr,
        )
        return 0
    status = 0
    pointers = cell_dirs(str(sweep_dir)) if any(sweep_dir.glob("*/t2exp_shard.json")) else []
    for run_dir in pointers:
        status = max(status, _collect_one(run_dir, prog))
    parent = sweep.parent_run
    if parent:
        now = run_status(open_client(sweep.tracking_uri, create=False), parent)
        if now == "RUNNING":
            now = close_sweep(sweep.tracking_uri, parent, sweep.work)
            print(
                f"{prog}: sweep {sweep_dir}: {sweep.counts()['done']} of {len(sweep.jobs)} jobs done; its report logged on "
                f"parent run {parent}, closed {now}",
                file=sys.stderr,
            )
        else:
            print(f"{prog}: sweep {sweep_dir}: parent run {parent} already {now}; nothing to close", file=sys.stderr)
    return status


def _collect_one(run_dir: Path, prog: str) -> int:
    try:
        print(f"{prog}: {collect(run_dir)}", file=sys.stderr)
    except T2ExpError as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file gone or unreadable: the path and the fault
        print(f"{prog}: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "t2exp collect") -> int:
    args = build_parser(prog).parse_args(argv)
    from t2exp import config

    config.register()
    status = 0
    for target in args.targets:
        try:
            submitted = _submitted_sweep(target, args.tracking_uri)
            if submitted is not None:
                status = max(status, collect_sweep(submitted, args.tracking_uri, prog))
                continue
            dirs = cell_dirs(target, args.tracking_uri)
        except T2ExpError as exc:
            print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
            status = 2
            continue
        for run_dir in dirs:
            status = max(status, _collect_one(run_dir, prog))
    return status


def _submitted_sweep(target: str, tracking_uri: str | None) -> Path | None:
    """The sweep directory ``target`` names when it is a submit-and-return sweep's, else None."""
    from t2exp.pipeline.submit import JOBS_FILE

    path = sweep_path(target, tracking_uri)
    return path if (path / JOBS_FILE).is_file() else None
