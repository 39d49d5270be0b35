"""The benchmark scripts run (``--quick``) and print their ratio line.

They are scripts, not timed tests: no speed is asserted here, only that each one completes on a
small input and reports the figure it exists for. Together they take minutes on two CPU cores
(each loads the embedder or starts t2exp processes), hence ``slow``.
"""

from __future__ import annotations

import os
import re

import pytest

from helpers.command import cli
from helpers.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.bench]

BENCH = ROOT / "benchmarks"


def run_script(name: str, *args: str, timeout: float = 900) -> str:
    """``python benchmarks/<name> --quick <args>`` run in this process, as its command line runs it
    (``__main__``, that argv, from the checkout, through :func:`helpers.command.cli`); what it
    printed. The worker already holds the libraries a script imports, so each script pays its own
    work only; the t2exp processes a script starts are real ones. A script that runs past
    ``timeout`` ends the worker with every thread's stack (a hung script fails the run instead of
    holding it)."""
    import faulthandler
    import runpy

    # the processes a script starts are not measured by CI's coverage: traced, they run several times slower
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    script = str(BENCH / name)
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        proc = cli(
            lambda: runpy.run_path(script, run_name="__main__"),
            ["--quick", *args],
            env={**env, "RUST_LOG": "error"},
            prog=script,
            replace_env=True,
        )
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def ratio(out: str, name: str) -> dict[str, str]:
    lines = [ln for ln in out.splitlines() if ln.startswith(f"RATIO {name}: ")]
    assert len(lines) == 1, f"no single 'RATIO {name}:' line in:\n{out[-3000:]}"
    return dict(kv.split("=", 1) for kv in lines[0].split(": ", 1)[1].split())


def test_retrieval_quality(tmp_path):
    out = run_script("retrieval_quality.py", "--cache-dir", str(tmp_path / "cache"))
    r = ratio(out, "retrieval_quality")
    for subset in ("FinQA", "TAT-DQA"):
        assert re.fullmatch(r"[+-]\d+\.\d", r[f"hybrid_minus_ref_{subset}"])
        assert f"## {subset}:" in out
        assert r[f"paper_hybrid_lists_differing_{subset}"].startswith("0/")  # t2exp's paper hybrid is the reference's
    assert "REF authors' hybrid" in out and "metadata_hybrid" in out


def test_throughput():
    out = run_script("throughput.py")
    r = ratio(out, "throughput")
    float(r["hybrid_batched_over_naive_cached"]), float(r["build_warm_over_cold"])  # measured figures (no speed asserted)
    same, checked = r["rankings_identical"].split("/")
    assert same == checked and int(checked) > 0  # batching never changes a ranking
    hits, n = r["reopened_hits"].split("/")
    assert hits == n == "2"  # both subsets' complete indices re-opened, not rebuilt
    assert "## query throughput" in out


def test_scaling(tmp_path):
    out = run_script("scaling.py", "--tmp", str(tmp_path))
    r = ratio(out, "scaling")
    assert r["span"] == "3k→10k"
    for key in (
        "BM25_LanceDB_FTS_p50",
        "BM25_bm25s_p50",
        "dense_ANN_p50",
        "BM25_store_batched_per_query",
        "hybrid_store_batched_per_query",
    ):
        float(r[key])  # a number (nan would mean a size was not measured)
        assert r[key] != "nan"
    assert r["fragments_after_build"] == "1"  # finalize() compacted the 40 insert batches
    float(r["store_bm25_batch_speedup"])  # the measured figure (no speed asserted: a loaded machine can invert it)


def test_sweep_reuse():
    out = run_script("sweep_reuse.py")
    r = ratio(out, "sweep_reuse")
    assert r["cells"] == "2"
    assert r["warm_index_hits"] == "4/4"  # 2 cells x 2 subsets: every index reused by the warm sweep
    assert r["warm_embeddings_computed"] == "0"  # nothing embedded again
    float(r["cold_over_warm"])  # the measured figure (no speed asserted)
    assert "isolated_over_warm" not in r  # --quick leaves the isolated runs out


def test_main_job():
    out = run_script("main_job.py", timeout=1500)
    r = ratio(out, "main_job")
    assert float(r["first_run_s"]) > 0 and float(r["rerun_s"]) > 0 and r["questions"] == "1"  # measured (no speed asserted)
    assert float(r["prompt_tokens_full_over_default"]) > 0
    assert "context.mode=full, same questions" in out
    assert "before: 0.5B float32 full documents" not in out and "nm_before" not in r  # --quick leaves the before run out


def test_dtype():
    out = run_script("dtype.py")
    r = ratio(out, "dtype")
    assert r["auto"] in ("float32", "bfloat16")
    float(r["prefill_fp32_over_bf16"]), float(r["decode_fp32_over_bf16"])  # measured figures (no speed asserted)


def test_gguf_read():
    out = run_script("gguf_read.py")
    r = ratio(out, "gguf_read")
    float(r["memmap_over_plain_view"])  # a measured figure (no speed asserted)
    assert r["same_reading"] == "true"  # the plain view reads what the memory map holds


def test_prompt_lookup():
    out = run_script("prompt_lookup.py")
    r = ratio(out, "prompt_lookup")
    float(r["plain_s_per_answer"]), float(r["lookup_s_per_answer"])  # measured figures (no speed asserted)
    same, n = r["identical"].split("/")
    assert int(n) == 1 and 0 <= int(same) <= 1


def test_explore():
    import shutil

    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium): the page is measured in headless Chromium")
    r = ratio(run_script("explore.py"), "explore")
    assert (r["questions"], r["cells"]) == ("500", "3")
    for key in ("page_mb", "first_rows_s", "filter_ms", "sort_ms", "search_ms"):
        float(r[key])  # measured figures (no speed asserted)


def test_run_overhead():
    r = ratio(run_script("run_overhead.py"), "run_overhead")
    float(r["every_time_cpu_s"]), float(r["shipped_cpu_s"]), float(r["every_time_over_shipped"])  # measured (no speed asserted)
    float(r["process_default_gc_cpu_s"]), float(r["process_cpu_s"]), float(r["default_gc_over_shipped"])  # measured (no speed asserted)
