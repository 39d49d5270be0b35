"""What t2exp's caches save on a retrieval sweep: 8 cells with shared caches vs 8 runs from scratch.

The cells (retrieval only, ``generator=none``) are Hydra "experiment" configs written to a
temporary config directory and selected with ``+sweep_cell=...`` (added to Hydra's search path),
so one ``python -m t2exp -m`` multirun can sweep cells that differ in more than one key:

    base k=3, base k=5, hybrid (relative, bm25s) k=3, hybrid k=5, hybrid (rrf), hybrid (store BM25),
    reranker (chunk_maxsim), metadata_hybrid

Measured wall times (each includes its Python start-up; MLflow logs to a temporary store):

- isolated: the 8 cells as 8 separate ``python -m t2exp`` runs, each with a fresh, empty cache
  directory (nothing reused: every embedding, index and reranker passage computed again);
- sweep, cold: one ``python -m t2exp -m`` over the 8 cells sharing one initially empty cache
  (later cells reuse what earlier ones computed);
- sweep, warm: the same multirun again on that now-filled cache (the per-cell prediction logs
  under ``runs/`` are deleted first, so every cell retrieves again instead of resuming).

    python benchmarks/sweep_reuse.py            # all 2,025 bundled questions
    python benchmarks/sweep_reuse.py --quick    # 2 cells, 20-document corpora, 5 questions a subset, no isolated runs

``--quick`` (the test suite's: that the script works and the warm sweep reuses every index) leaves
out the isolated runs and their ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

# name -> (rag_method option, extra keys of the cell)
CELLS: dict[str, tuple[str, dict]] = {
    "base_k3": ("base", {"k": 3}),
    "base_k5": ("base", {"k": 5}),
    "hybrid_k3": ("hybrid", {"k": 3}),
    "hybrid_k5": ("hybrid", {"k": 5}),
    "hybrid_rrf": ("hybrid", {"k": 3, "rag_method": {"fusion": "rrf"}}),
    "hybrid_store": ("hybrid", {"k": 3, "rag_method": {"lexical": "store"}}),
    "reranker": ("reranker", {"k": 3}),
    "metadata_hybrid": ("metadata_hybrid", {"k": 3}),
}
QUICK_CELLS = ["base_k3", "hybrid_k3"]


def write_cells(conf: Path, names: list[str]) -> None:
    import yaml

    d = conf / "sweep_cell"
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        method, extra = CELLS[name]
        body = {"defaults": [{"override /rag_method": method}], **extra}
        (d / f"{name}.yaml").write_text("# @package _global_\n" + yaml.safe_dump(body, sort_keys=False))


def t2exp(args: list[str], cache: Path, work: Path, common: list[str], timeout: float) -> float:
    cmd = [
        sys.executable,
        "-m",
        "t2exp",
        *args,
        *common,
        f"paths.work={work}",
        f"paths.cache={cache}",
        f"paths.models={C.SHARED_CACHE / 'models'}",
        f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
        f"tracking.artifact_location={work / 'artifacts'}",
        f"hydra.run.dir={work / 'hydra' / cache.name}",
        f"hydra.sweep.dir={work / 'multirun' / cache.name}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "RUST_LOG": "error"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=C.ROOT, env=env, timeout=timeout)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        sys.exit(f"sweep_reuse: `{' '.join(cmd[:6])} ...` failed (exit {proc.returncode})")
    return secs


def last_sweep_children(db: Path) -> list[dict[str, float]]:
    """The metrics of the newest sweep's child runs in the MLflow store ``db``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("t2exp")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"]) if exp else []
    parent = next(r for r in runs if r.data.tags.get("t2exp.sweep") == "parent")
    return [r.data.metrics for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="t2exp sweep with shared caches vs runs from scratch")
    ap.add_argument("--quick", action="store_true", help="2 cells, 20-document corpora, 5 questions per subset, no isolated runs")
    ap.add_argument("--cells", help=f"comma-separated subset of {','.join(CELLS)}")
    ap.add_argument("--limit", type=int, default=None, help="questions per subset (default all)")
    ap.add_argument("--corpus-size", type=int, default=None, help="documents per subset (seeded subsample)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per t2exp process")
    ap.add_argument("--keep", help="keep the work directory here")
    args = ap.parse_args(argv)
    names = args.cells.split(",") if args.cells else list(CELLS)
    if args.quick:
        names = names if args.cells else QUICK_CELLS
        args.limit = args.limit or 5
        args.corpus_size = args.corpus_size or 20
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        sys.exit(f"sweep_reuse: unknown cell(s) {unknown}; choose from {', '.join(CELLS)}")

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="t2exp-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "conf"
    write_cells(conf, names)
    common = [
        f"hydra.searchpath=[file://{conf}]",
        "generator=none",
        f"dataset.limit={'null' if args.limit is None else args.limit}",
    ] + ([f"dataset.corpus_size={args.corpus_size}"] if args.corpus_size else [])
    print(
        f"# sweep_reuse  cells={','.join(names)}  questions/subset={args.limit or 'all'}  "
        f"corpus/subset={args.corpus_size or 'all'}  machine: {C.machine()}"
    )
    print(f"# common overrides: {' '.join(common[1:])} (+ temporary paths.cache, tracking, hydra dirs)")
    try:
        isolated = {}
        for n in [] if args.quick else names:
            isolated[n] = t2exp([f"+sweep_cell={n}"], work / f"cache_isolated_{n}", work, common, args.timeout)
            print(f"# isolated {n}: {isolated[n]:.1f}s", flush=True)
        sweep_args = ["-m", "+sweep_cell=" + ",".join(names)]
        shared = work / "cache_shared"
        cold = t2exp(sweep_args, shared, work, common, args.timeout)
        print(f"# sweep cold: {cold:.1f}s", flush=True)
        shutil.rmtree(shared / "runs", ignore_errors=True)  # retrieve again rather than resume
        warm = t2exp(sweep_args, shared, work, common, args.timeout)
        print(f"# sweep warm: {warm:.1f}s", flush=True)
        warm_runs = last_sweep_children(work / "mlflow.db")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    total = sum(isolated.values())
    print(f"\n## wall time, {len(names)} cells\n")
    rows = [[f"isolated: {n} (fresh empty cache)", s] for n, s in isolated.items()]
    rows += [["isolated, sum", total]] if isolated else []
    rows += [
        ["one multirun, shared cache starting empty", cold],
        ["one multirun, warm shared cache", warm],
    ]
    print(C.table(["runs", "seconds"], rows, floatfmt=".1f"))
    if isolated:
        print(f"\nisolated sum / warm sweep: {total / warm:.1f}x;  isolated sum / cold sweep: {total / cold:.1f}x")
    hits = [v for r in warm_runs for k, v in r.items() if k.endswith("/index_cache_hit")]
    computed = sum(r.get("embeddings_computed", 0.0) for r in warm_runs)
    print(f"warm sweep: {int(sum(hits))}/{len(hits)} indices reused, {int(computed)} documents or questions embedded")
    ratios = {"isolated_over_warm": round(total / warm, 1), "isolated_over_cold_sweep": round(total / cold, 1)} if isolated else {}
    C.ratio_line(
        "sweep_reuse",
        cells=len(names),
        warm_index_hits=f"{int(sum(hits))}/{len(hits)}",
        warm_embeddings_computed=int(computed),
        **ratios,
        cold_over_warm=round(cold / warm, 1),
        warm_s=round(warm, 1),
        **({"isolated_s": round(total, 1)} if isolated else {}),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
