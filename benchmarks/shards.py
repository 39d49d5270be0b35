"""One cell split over a Slurm job array: the same 400 questions with 1, 2 and 4 shards, wall time and merge.

The cell is the report sample (``dataset.limit=200``, seed 0: 200 FinQA + 200 TAT-DQA dev questions of
the bundled data), ``rag_method=oracle`` (nothing to embed or index), answered by a stand-in
generator: ``tests/fakes/openai_server.py --delay D``, an OpenAI-compatible server that holds every
answer D seconds, reached through ``generator=openai_compat`` with one request at a time per
process (``generator.max_concurrency=1``). The delay stands for a GPU's time per answer; it is the
part of the work that shards divide. Each shard count runs from an empty cache and its own MLflow
store, as ``python -m t2exp -m shards=N hydra/launcher=slurm`` inside the local cluster's network
namespace (``scripts/in_slurm_ns.sh``), which waits for the array; the last shard merges the cell.
``shards=1`` is the unsharded cell as one Slurm task.

Measured per shard count:

- wall: the launching process, start to end (submission, Slurm, every task's start-up, the answers,
  the merge, the launcher noticing the end);
- slowest shard: the longest shard run (MLflow start to end: loading the data, answering, logging),
  and its speed-up over the unsharded cell's run;
- merge: the cell run's end minus the last shard run's end (the last shard joins the shards'
  predictions, checks them, scores and logs the cell: what ``t2exp collect`` runs);
- whether the merged ``predictions.jsonl`` equals the unsharded one, row for row, apart from each
  answer's measured ``generate_seconds`` (byte for byte where no time is measured: ``generator=none``,
  ``tests/pipeline/test_slurm.py``).

A first, unmeasured run (1 question a subset) warms the cluster, the page cache and Python's
bytecode cache, so that the first count measured does not carry them.

Start the cluster first, declaring as many CPUs as the largest shard count so that every shard runs
at once (the stand-in's delay, not the cores, is what runs in parallel):

    T2EXP_SLURM_CPUS=4 bash scripts/slurm_local.sh up
    python benchmarks/shards.py                   # 400 questions, 1/2/4 shards, 0.1 s per answer
    python benchmarks/shards.py --quick           # 10 questions, 1/2 shards, 0.01 s per answer
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

WRAPPER = C.ROOT / "scripts" / "in_slurm_ns.sh"
STAND_IN = C.ROOT / "tests" / "fakes" / "openai_server.py"
MODEL = "stand-in"


def in_ns(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(WRAPPER), *args], capture_output=True, text=True, timeout=timeout, cwd=C.ROOT)


def cluster_cpus() -> int:
    """CPUs of the local cluster's node; ends the script when no cluster answers."""
    hint = "start it with `T2EXP_SLURM_CPUS=4 bash scripts/slurm_local.sh up` (root, Debian)"
    try:
        proc = in_ns("sinfo", "-h", "-p", "debug", "-o", "%T %c")
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.exit(f"shards: no local Slurm cluster ({exc}); {hint}")
    fields = proc.stdout.split()
    if proc.returncode != 0 or len(fields) < 2 or fields[0] not in {"idle", "mixed", "allocated"}:
        sys.exit(f"shards: local Slurm cluster not ready ({(proc.stderr or proc.stdout).strip() or 'no node'}); {hint}")
    return int(fields[1].rstrip("+"))


def start_stand_in(delay: float) -> tuple[subprocess.Popen, str]:
    """The stand-in generator inside the cluster's namespace (where the shards run); its base URL."""
    proc = subprocess.Popen(
        ["bash", str(WRAPPER), sys.executable, str(STAND_IN), "--model", MODEL, "--port", "0", "--delay", str(delay)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=C.ROOT,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout or []:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        if "listening on " in line:
            return proc, line.rsplit("listening on ", 1)[1].strip()
    proc.kill()
    sys.exit("shards: the stand-in generator did not start in 60 s")


def env() -> dict[str, str]:
    out = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "T2EXP_PROGRESS": "0"}
    out.pop("T2EXP_PARENT_RUN_ID", None)
    if out.get("PYTHONPATH"):  # the tasks start elsewhere: a relative entry (PYTHONPATH=src) would name nothing
        out["PYTHONPATH"] = os.pathsep.join(str((C.ROOT / p).resolve()) for p in out["PYTHONPATH"].split(os.pathsep) if p)
    if sys.prefix != sys.base_prefix:
        out["VIRTUAL_ENV"] = sys.prefix  # the launcher's setup line activates this venv
    return out


def run_cell(shards: int, work: Path, cell: list[str], timeout: float) -> float:
    """``python -m t2exp -m shards=N ... hydra/launcher=slurm`` in the cluster's namespace; its wall seconds."""
    name = f"t2exp-bench-{uuid.uuid4().hex[:8]}"
    cmd = [
        "bash",
        str(WRAPPER),
        sys.executable,
        "-m",
        "t2exp",
        "-m",
        f"shards={shards}",
        *cell,
        "hydra/launcher=slurm",
        "hydra.launcher.partition=debug",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=1",
        f"hydra.launcher.timeout_min={max(5, int(timeout // 60))}",
        f"hydra.launcher.name={name}",
        f"paths.work={work}",
        f"paths.cache={work / 'cache'}",
        f"paths.models={C.SHARED_CACHE / 'models'}",
        f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
        f"tracking.artifact_location={work / 'artifacts'}",
        f"hydra.run.dir={work / 'hydra'}",
        f"hydra.sweep.dir={work / 'multirun'}",
    ]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=C.ROOT, env=env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        in_ns("scancel", f"--name={name}")
        raise
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"shards: shards={shards} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return wall


def runs_of(work: Path) -> dict[str, Any]:
    """The cell's MLflow runs: its cell run and its shard runs (none when unsharded), once none is RUNNING."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    deadline = time.monotonic() + 60
    while True:
        exp = client.get_experiment_by_name("t2exp")
        runs = client.search_runs([exp.experiment_id]) if exp else []
        mine = [r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"]
        if mine and all(r.info.status != "RUNNING" for r in mine) or time.monotonic() > deadline:
            break
        time.sleep(1)
    shards = [r for r in mine if "t2exp.shard" in r.data.tags]
    (cell,) = [r for r in mine if "t2exp.shard" not in r.data.tags]
    if cell.info.status != "FINISHED":
        sys.exit(f"shards: the cell run in {work} is {cell.info.status}: {cell.data.tags.get('t2exp.error')}")
    return {"cell": cell, "shards": shards}


def measure(shards: int, work: Path, cell: list[str], timeout: float) -> dict[str, Any]:
    wall = run_cell(shards, work, cell, timeout)
    runs = runs_of(work)
    cell_run, parts = runs["cell"], runs["shards"] or [runs["cell"]]
    slowest = max((r.info.end_time - r.info.start_time) / 1000 for r in parts)
    merge = (cell_run.info.end_time - max(r.info.end_time for r in runs["shards"])) / 1000 if runs["shards"] else 0.0
    (predictions,) = (work / "cache" / "runs").glob("*/predictions.jsonl")
    rows = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = int(sum(v for k, v in cell_run.data.metrics.items() if k.endswith("/questions") and not k.startswith("avg")))
    return {
        "shards": shards,
        "wall": wall,
        "slowest": slowest,
        "merge": merge,
        "questions": questions,
        "predictions": [{k: v for k, v in row.items() if not k.endswith("_seconds")} for row in rows],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="one cell over 1, 2 and 4 Slurm array tasks: wall time and merge overhead")
    ap.add_argument("--quick", action="store_true", help="5 questions per subset, 1 and 2 shards, 0.01 s per answer")
    ap.add_argument("--limit", type=int, default=C.REPORT_LIMIT, help="questions per subset (default 200: 400 in all)")
    ap.add_argument("--shards", default="1,2,4", help="shard counts, comma-separated; the first is the baseline")
    ap.add_argument("--delay", type=float, default=0.1, help="the stand-in's seconds per answer")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per shard count")
    ap.add_argument("--keep", help="keep the work directory here")
    args = ap.parse_args(argv)
    if args.quick:
        args.limit, args.shards, args.delay = 5, "1,2", 0.01
    counts = [int(n) for n in args.shards.split(",")]
    cpus = cluster_cpus()
    if max(counts) > cpus:
        print(f"# note: the node declares {cpus} CPUs; {max(counts)} shards of 1 CPU each run in waves, not all at once")
    cell = [
        "rag_method=oracle",
        f"dataset.limit={args.limit}",
        f"seed={C.REPORT_SEED}",
        "generator=openai_compat",
        f"generator.model={MODEL}",
        "generator.name=stand-in",
        "generator.max_concurrency=1",
        "tracking.traces=false",
    ]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="t2exp-shards-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"# shards  counts={args.shards}  questions/subset={args.limit}  stand-in delay={args.delay}s/answer  "
        f"Slurm node CPUs={cpus}  machine: {C.machine()}"
    )
    server, url = start_stand_in(args.delay)
    print(f"# cell: {' '.join(cell)} generator.base_url={url} (+ a fresh paths.cache and MLflow store per count)", flush=True)
    results = []
    try:
        limit_at = cell.index(f"dataset.limit={args.limit}")
        warm = [*cell[:limit_at], "dataset.limit=1", *cell[limit_at + 1 :], f"generator.base_url={url}"]
        print(f"# warm-up (not measured): {run_cell(counts[0], work / 'warmup', warm, args.timeout):.1f}s", flush=True)
        for n in counts:
            results.append(measure(n, work / f"shards{n}", [*cell, f"generator.base_url={url}"], args.timeout))
            r = results[-1]
            print(f"# shards={n}: wall {r['wall']:.1f}s, slowest shard {r['slowest']:.1f}s, merge {r['merge']:.2f}s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        differ = [r["shards"] for r in results[1:] if r["predictions"] != results[0]["predictions"]]
        if not args.keep and not differ:
            shutil.rmtree(work, ignore_errors=True)
    for r in results[1:]:
        if r["shards"] in differ:
            print(f"# shards={r['shards']}: {mismatch(results[0]['predictions'], r['predictions'])} (kept: {work})")
    report(results, args.delay)
    return 0


def mismatch(base: list[dict], other: list[dict]) -> str:
    """Which rows and fields of ``other`` differ from ``base``, in one line."""
    if len(base) != len(other):
        return f"{len(other)} rows, the unsharded run {len(base)}"
    rows = [(a["id"], sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))) for a, b in zip(base, other, strict=True) if a != b]
    fields = sorted({k for _, ks in rows for k in ks})
    return f"{len(rows)} rows differ from the unsharded run in {', '.join(fields)}; first {rows[0][0]}"


def report(results: list[dict[str, Any]], delay: float) -> None:
    base = results[0]
    questions = base["questions"]
    print(f"\n## one cell of {questions} questions, stand-in {delay} s per answer\n")
    rows = [
        [
            r["shards"],
            r["wall"],
            base["wall"] / r["wall"],
            r["slowest"],
            base["slowest"] / r["slowest"],
            r["merge"],
            r["wall"] - r["slowest"] - r["merge"],
            questions * delay / r["shards"],
            "yes" if r["predictions"] == base["predictions"] else "NO",
        ]
        for r in results
    ]
    print(
        C.table(
            [
                "shards",
                "wall s",
                "speed-up",
                "slowest shard s",
                "shard speed-up",
                "merge s",
                "rest s",
                "delay per shard s",
                "predictions = unsharded",
            ],
            rows,
            floatfmt=".2f",
        )
    )
    print(
        "\nrest = wall - slowest shard - merge: the launcher's start-up, submission, Slurm starting the tasks, Python start-up "
        "of each task, the launcher noticing the end"
    )
    same = sum(r["predictions"] == base["predictions"] for r in results[1:])
    values: dict[str, Any] = {"questions": questions, "delay_s": delay}
    for r in results:
        values[f"wall_{r['shards']}"] = round(r["wall"], 1)
    for r in results[1:]:
        values[f"speedup_{r['shards']}_over_{base['shards']}"] = round(base["wall"] / r["wall"], 2)
        values[f"shard_speedup_{r['shards']}"] = round(base["slowest"] / r["slowest"], 2)
        values[f"merge_s_{r['shards']}"] = round(r["merge"], 2)
        values[f"merge_share_{r['shards']}"] = round(r["merge"] / r["wall"], 3)
    C.ratio_line("shards", **values, identical_predictions=f"{same}/{len(results) - 1}")


if __name__ == "__main__":
    sys.exit(main())
