"""Reliability end to end through ``python -m t2exp`` as a real subprocess.

Remote endpoints are local fakes speaking the real wire formats (``tests/fakes``), run in this
test process so a test can script failures, slow answers down and count requests:

- bad config / bad data / missing key: one line, exit 2, nothing written (no Hydra dir, no MLflow
  run, no cache);
- an endpoint that fails after N answers: the run fails with one line; after the endpoint
  recovers, the re-run completes and the endpoint sees only the requests not answered before;
- SIGTERM mid-generation: the MLflow run is KILLED, and the re-run finishes with predictions
  identical to an uninterrupted run while the fake answers each question exactly once;
- two concurrent processes needing the same index build it once;
- API keys (env and ``generator.api_key=``) appear in no MLflow param, tag, artifact, Hydra file,
  log or captured output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fakes.openai_server import FakeOpenAIServer
from fakes.providers import OpenAIFake
from helpers.app import answering_args as gen_args
from helpers.app import app_overrides
from helpers.command import cli
from helpers.net import free_port
from helpers.paths import ROOT
from helpers.tracking import mlflow_runs, seed_tracking

pytestmark = pytest.mark.full

pytest.importorskip("openai")

MODEL = "fake-model"
# environment variables that would change what a run does (keys, endpoints) are dropped
_DROP = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_COMPAT_API_KEY",
    "VLLM_API_KEY",
    "CO_API_KEY",
    "COHERE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "T2EXP_PARENT_RUN_ID",
    "HYDRA_FULL_ERROR",
)


# --- helpers -----------------------------------------------------------------------------------------
def app_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("T2EXP_SECRET_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def app_cmd(args: list[str], cache: Path, track: Path) -> list[str]:
    return [sys.executable, "-m", "t2exp", *args, *app_overrides(cache, track)]


def run_t2exp(args, cache, track, *, env=None, timeout=600, process=False, seed=True) -> subprocess.CompletedProcess:
    """``python -m t2exp`` in this process (``helpers.command.cli``), or a real process (``process=True``,
    bounded by ``timeout``) where the process is the subject; ``seed``: the MLflow store starts as
    the session's migrated copy (``helpers.tracking.seed_tracking``)."""
    if seed:
        seed_tracking(track)
    if process:
        return subprocess.run(app_cmd(args, cache, track), capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env or app_env())
    from t2exp.__main__ import main

    return cli(main, [*args, *app_overrides(cache, track)], env=env or app_env(), replace_env=True)


def popen_t2exp(args, cache, track, out_dir: Path, *, env=None) -> subprocess.Popen:
    seed_tracking(track)
    out_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        app_cmd(args, cache, track),
        cwd=ROOT,
        env=env or app_env(),
        stdout=open(out_dir / "stdout.txt", "w"),
        stderr=open(out_dir / "stderr.txt", "w"),
    )


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("t2exp:")]


def prediction_file(cache: Path) -> Path:
    (path,) = sorted(cache.glob("runs/*/predictions.jsonl"))
    return path


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def short_reply(messages) -> str:
    """Deterministic, short and question-specific."""
    return f"Final answer: {sum(map(ord, messages[-1]['content'])) % 997}"


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "cache", tmp_path / "track"


# --- 1. bad input: one line, exit 2, nothing written ------------------------------------------------
def _bad_parquet(tmp_path: Path) -> Path:
    df = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet").head(4)
    bad = tmp_path / "data" / "FinQA_test.parquet"
    bad.parent.mkdir()
    df.rename(columns={"context": "contexts"}).to_parquet(bad)
    return bad


BAD_INPUT = {
    "alpha": (["rag_method.alpha=1.5"], ["rag_method.alpha=1.5", "[0, 1]"]),
    "sweep_cell": (["-m", "k=3,0", "generator=none"], ["k=0", "integer >= 1"]),
    "subset": (["dataset.subsets=[FinQA,FinQB]"], ["dataset.subsets='FinQB'", "TAT-DQA"]),
    "reranker_candidates": (["rag_method=reranker", "rag_method.candidates=2", "k=5"], ["rag_method.candidates=2", ">= k (5)"]),
    "vllm_missing": (["generator=llama33_70b", "generator.backend=vllm"], ["generator.backend='vllm'", "t2exp[vllm]"]),
    "vllm_server_no_command": (["generator=vllm_server"], ["generator.command=None", "t2exp[vllm]"]),
    "vllm_server_bad_command": (
        ["generator=vllm_server", "generator.command=[/nonexistent/python,-m,vllm]"],
        ["generator.command='/nonexistent/python'", "executable"],
    ),
    "api_key_missing": (["embedder=openai", "generator=none"], ["embedder.api_key=None", "OPENAI_API_KEY"]),
    "renamed_column": (None, ["FinQA_test.parquet", "row 0", "context", "'contexts'"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_path):
    args, expected = BAD_INPUT[case]
    if case.startswith("vllm") and case != "vllm_server_bad_command" and importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    if args is None:
        args = ["dataset=finqa", f"dataset.path={_bad_parquet(tmp_path)}", "generator=none"]
    cache, track = tmp_path / "cache", tmp_path / "track"
    # one case as a real process: the console entry's exit status and stderr line, not only main()'s
    proc = run_t2exp(args, cache, track, timeout=300, process=case == "alpha", seed=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and proc.stderr.strip() == lines[0], proc.stderr  # ONE line, nothing else
    for part in expected:
        assert part in lines[0], (part, lines[0])
    assert "Traceback" not in proc.stderr
    # nothing written: no cache, no MLflow store, no Hydra run or sweep directory
    assert not cache.exists() and not track.exists(), sorted(p.name for p in tmp_path.rglob("*"))


# --- 3. remote failures: one line, nothing computed is lost ------------------------------------------
@pytest.mark.slow
def test_generation_endpoint_fails_after_n_answers_then_resume_sends_only_the_rest(dirs):
    cache, track = dirs
    n_q, n_ok = 5, 2
    srv = FakeOpenAIServer(model=MODEL, script=["ok"] * n_ok, default="429", reply=short_reply).start()
    port = srv.port
    try:
        proc = run_t2exp(gen_args(srv.base_url, n_q), cache, track)
    finally:
        srv.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert "HTTP 429" in line and srv.base_url in line and "after 2 attempts" in line, line
    assert "Traceback" not in proc.stderr
    assert len(srv.requests) == n_ok + 2  # two answers, then one request tried twice
    client, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FAILED"]
    assert "HTTP 429" in runs[0].data.tags["t2exp.error"]
    assert len(read_rows(prediction_file(cache))) == n_ok  # the answers so far are on disk

    healthy = FakeOpenAIServer(model=MODEL, reply=short_reply, port=port).start()  # the endpoint is back
    try:
        proc = run_t2exp(gen_args(healthy.base_url, n_q), cache, track)
    finally:
        healthy.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(healthy.requests) == n_q - n_ok  # only the questions not answered before
    _, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FAILED", "FINISHED"]
    assert runs[1].data.metrics["llm_calls"] == n_q - n_ok
    rows = read_rows(prediction_file(cache))
    assert len(rows) == n_q and len({r["id"] for r in rows}) == n_q
    assert all(r["generation"].startswith("Final answer:") for r in rows)


@pytest.mark.slow
def test_a_kept_prediction_line_that_is_not_utf8_stops_the_resume_with_one_line(dirs):
    """The resumed cell reads its predictions.jsonl back: a damaged line (not UTF-8) is one line
    naming the file and the line, the file is left as it was."""
    cache, track = dirs
    srv = FakeOpenAIServer(model=MODEL, script=["ok"] * 2, default="429", reply=short_reply).start()
    try:
        assert run_t2exp(gen_args(srv.base_url, 3), cache, track).returncode == 2
        path = prediction_file(cache)
        damaged = path.read_bytes().replace(b"Final answer", b"Final\xe9answer", 1)
        path.write_bytes(damaged)
        proc = run_t2exp(gen_args(srv.base_url, 3), cache, track)
    finally:
        srv.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert f"{path}: line 1: not UTF-8 text" in line, line
    assert "Traceback" not in proc.stderr and path.read_bytes() == damaged


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["down", "hang", "malformed", "500"])
def test_generation_endpoint_errors_end_the_run_with_one_line(mode, dirs):
    cache, track = dirs
    srv = None
    if mode == "down":
        base_url = f"http://127.0.0.1:{free_port()}/v1"
    else:
        srv = FakeOpenAIServer(model=MODEL, default=mode).start()
        base_url = srv.base_url
    try:
        proc = run_t2exp(gen_args(base_url, 2, "generator.timeout=1"), cache, track)
    finally:
        if srv is not None:
            srv.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    expected = {"down": "connection error", "hang": "timeout", "malformed": "malformed response", "500": "HTTP 500"}[mode]
    assert expected in line and base_url in line and "after 2 attempts" in line, line
    assert "Traceback" not in proc.stderr
    _, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FAILED"]


class FlakyEmbeddings(OpenAIFake):
    """OpenAI embeddings endpoint that answers ``budget`` requests, then 503 until healed."""

    def __init__(self, budget: int | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.budget = budget
        self.embedded: list[str] = []  # texts of answered requests

    def handle(self, rec):
        if rec.path.startswith("/v1/embeddings"):
            with self._lock:
                ok = self.budget is None or self.budget > 0
                if ok and self.budget is not None:
                    self.budget -= 1
            if not ok:
                with self._lock:
                    self.requests.append(rec)
                return self.error_reply(503, "injected outage")
        reply = super().handle(rec)
        if reply.status == 200 and rec.path.startswith("/v1/embeddings"):
            with self._lock:
                self.embedded.extend(rec.body["input"])
        return reply


def _small_finqa(tmp_path: Path, n_docs: int = 12) -> tuple[Path, pd.DataFrame]:
    src = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet")
    docs = src.drop_duplicates("context_id").head(n_docs)
    rows = src[src.context_id.isin(docs.context_id)].drop_duplicates("context_id").copy()
    rows["split"] = "test"
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    rows.to_parquet(d / "FinQA_test.parquet")
    return d, rows


def embed_args(data_dir: Path, base_url: str, method: str = "base") -> list[str]:
    return [
        "dataset=finqa",
        f"dataset.path={data_dir}",
        "dataset.limit=null",
        f"rag_method={method}",
        "generator=none",
        "embedder=openai",
        f"embedder.base_url={base_url}",
        "embedder.api_key=sk-test",
        "embedder.dim=8",
        "embedder.batch_size=4",
        "embedder.max_retries=1",
        "embedder.backoff_base=0",
    ]


@pytest.mark.slow
def test_embedding_endpoint_outage_keeps_embeddings_and_resume_embeds_only_the_rest(tmp_path, dirs):
    cache, track = dirs
    data_dir, rows = _small_finqa(tmp_path, 12)  # 12 documents = 3 requests of 4
    fake = FlakyEmbeddings(budget=2).start()
    try:
        proc = run_t2exp(embed_args(data_dir, fake.base_url), cache, track)
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = error_lines(proc.stderr)
        assert "embedder=openai" in line and "503" in line, line
        assert "Traceback" not in proc.stderr
        first = list(fake.embedded)
        assert len(first) == 8
        fake.budget = None  # the endpoint recovers
        fake.embedded.clear()
        proc = run_t2exp(embed_args(data_dir, fake.base_url), cache, track)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        fake.stop()
    docs = set(rows.context)
    again = [t for t in fake.embedded if t in docs]
    assert len(again) == 4 and not set(again) & set(first)  # only the 4 documents not embedded before
    _, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FAILED", "FINISHED"]
    assert runs[1].data.metrics["FinQA/corpus_size"] == 12


# --- 4. SIGTERM mid-generation -----------------------------------------------------------------------
class GatedReply:
    """Answers the first ``free`` requests at once; every later one waits until ``release`` is set
    (the test sets it once its signal is sent), so the signal lands with a request in flight."""

    def __init__(self, free: int) -> None:
        self.free, self.seen, self.release = free, 0, threading.Event()

    def __call__(self, messages) -> str:
        self.seen += 1
        if self.seen > self.free:
            assert self.release.wait(timeout=300), "the test never released the reply"
        return short_reply(messages)


def _wait_for_rows(cache: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        files = sorted(cache.glob("runs/*/predictions.jsonl"))
        if files and len(read_rows(files[0])) >= n:
            return
        assert proc.poll() is None, "the run ended before it was interrupted"
        time.sleep(0.05)
    raise AssertionError(f"no {n} predictions within {timeout}s")


@pytest.mark.slow
def test_sigterm_mid_generation_is_killed_resumable_and_repeats_no_work(tmp_path, dirs):
    cache, track = dirs
    n_q = 6
    gated = GatedReply(free=2)
    srv = FakeOpenAIServer(model=MODEL, reply=gated).start()
    try:
        proc = popen_t2exp(gen_args(srv.base_url, n_q), cache, track, tmp_path / "run1")
        try:
            _wait_for_rows(cache, 2, proc)
            proc.send_signal(signal.SIGTERM)
            gated.release.set()  # the third request, in flight when the signal came, is answered now
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr = (tmp_path / "run1" / "stderr.txt").read_text()
        assert rc == 128 + signal.SIGTERM, stderr[-3000:]
        (line,) = error_lines(stderr)
        assert "interrupted by SIGTERM" in line and "KILLED" in line and "resume" in line, line
        assert "Traceback" not in stderr
        _, runs = mlflow_runs(track)
        assert [r.info.status for r in runs] == ["KILLED"]
        kept = read_rows(prediction_file(cache))
        # the request in flight was finished and written: every answer the server gave is kept
        assert 2 <= len(kept) < n_q and len(srv.requests) == len(kept)

        proc2 = run_t2exp(gen_args(srv.base_url, n_q), cache, track)
        assert proc2.returncode == 0, proc2.stderr[-3000:]
        assert len(srv.requests) == n_q  # across both runs: each question asked exactly once
        _, runs = mlflow_runs(track)
        assert [r.info.status for r in runs] == ["KILLED", "FINISHED"]
        assert runs[1].data.metrics["llm_calls"] == n_q - len(kept)
        resumed = read_rows(prediction_file(cache))
    finally:
        srv.close()

    # an uninterrupted run (fresh cache, fresh server) gives identical predictions
    ref_cache, ref_track = tmp_path / "ref_cache", tmp_path / "ref_track"
    ref = FakeOpenAIServer(model=MODEL, reply=short_reply).start()
    try:
        proc3 = run_t2exp(gen_args(ref.base_url, n_q), ref_cache, ref_track)
    finally:
        ref.close()
    assert proc3.returncode == 0, proc3.stderr[-3000:]
    reference = read_rows(prediction_file(ref_cache))

    def answers(rows):  # each answer's seconds are the server's timing, not part of the answer
        return sorted(({k: v for k, v in r.items() if k != "generate_seconds"} for r in rows), key=lambda r: r["id"])

    assert answers(resumed) == answers(reference)
    assert all(r["generate_seconds"] is not None for r in resumed)
    assert [r["id"] for r in resumed] == [r["id"] for r in reference]  # same order too


# --- 5. concurrent sweep cells build a shared index once ---------------------------------------------
class GatedEmbeddings(FlakyEmbeddings):
    """Holds every embeddings request until ``gate`` is set; ``first`` is set when one arrives."""

    def __init__(self, **kwargs) -> None:
        super().__init__(budget=None, **kwargs)
        self.first = threading.Event()
        self.gate = threading.Event()

    def handle(self, rec):
        if rec.path.startswith("/v1/embeddings"):
            self.first.set()
            assert self.gate.wait(300), "the test never opened the gate"
        return super().handle(rec)


def _read_until(stream, text: str) -> str:
    """Lines of ``stream`` up to the first one containing ``text`` (blocking reads, no polling)."""
    seen = []
    for line in stream:
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"stream ended without {text!r}:\n" + "".join(seen)[-2000:])


@pytest.mark.slow
def test_two_processes_needing_one_index_build_it_once(tmp_path):
    """Synchronised on events, not on timing: the first process is held inside its index build
    (its first embeddings request waits on a gate) until the second one says it waits for the
    build lock; then the gate opens."""
    cache, track = tmp_path / "cache", tmp_path / "track"
    data_dir, rows = _small_finqa(tmp_path, 32)
    fake = GatedEmbeddings().start()
    procs: list[subprocess.Popen] = []
    try:
        # both cells share one MLflow store; create it first (concurrent schema creation is racy)
        from t2exp.tracking.mlflow_run import ensure_tracking

        ensure_tracking(f"sqlite:///{track / 'mlflow.db'}", "t2exp", str(track / "artifacts"))
        procs.append(popen_t2exp(embed_args(data_dir, fake.base_url, "base"), cache, track, tmp_path / "base"))
        assert fake.first.wait(300), (tmp_path / "base" / "stderr.txt").read_text()[-2000:]  # the builder holds the lock
        # Hydra's job logging writes to stdout: read both streams, merged
        second = subprocess.Popen(
            app_cmd(embed_args(data_dir, fake.base_url, "hybrid"), cache, track),
            cwd=ROOT,
            env=app_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append(second)
        _read_until(second.stdout, "is being built by another process; waiting for it")
        fake.gate.set()
        rest = second.stdout.read()
        rcs = [p.wait(timeout=600) for p in procs]
    finally:
        fake.gate.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
        fake.stop()
    assert rcs == [0, 0], [(tmp_path / "base" / "stderr.txt").read_text()[-2000:], rest[-2000:]]
    _, runs = mlflow_runs(track)
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    by_method = {r.data.params["rag_method.name"]: r.data.metrics for r in runs}
    assert by_method["base"]["FinQA/index_cache_hit"] == 0.0 and by_method["hybrid"]["FinQA/index_cache_hit"] == 1.0
    assert by_method["base"].get("FinQA/index_inserted") == 32.0 and by_method["hybrid"].get("FinQA/index_inserted") == 0.0
    docs = set(rows.context)
    embedded_docs = [t for t in fake.embedded if t in docs]
    assert len(embedded_docs) == len(docs) == 32  # no document embedded twice


@pytest.mark.slow
def test_the_same_cell_run_twice_at_once_asks_each_question_once(tmp_path, dirs):
    """A second process running the same cell waits for the first (cell lock), then resumes
    from its predictions: no question is answered twice, no prediction written twice."""
    cache, track = dirs
    n_q = 6
    gated = GatedReply(free=0)  # the first process's answers wait until the second waits on the cell
    srv = FakeOpenAIServer(model=MODEL, reply=gated).start()
    procs: list[subprocess.Popen] = []
    try:
        from t2exp.tracking.mlflow_run import ensure_tracking

        ensure_tracking(f"sqlite:///{track / 'mlflow.db'}", "t2exp", str(track / "artifacts"))
        procs += [popen_t2exp(gen_args(srv.base_url, n_q), cache, track, tmp_path / f"p{i}") for i in range(2)]
        end = time.monotonic() + 300
        said = [tmp_path / f"p{i}" / name for i in range(2) for name in ("stdout.txt", "stderr.txt")]  # Hydra logs to stdout
        while not any("is being run by another process" in f.read_text() for f in said):
            assert time.monotonic() < end and all(p.poll() is None for p in procs), "neither process waited for the other"
            time.sleep(0.05)  # waiting for a condition (a line in a log), not for time to pass
        gated.release.set()
        rcs = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        srv.close()
    assert rcs == [0, 0], [(tmp_path / f"p{i}" / "stderr.txt").read_text()[-2000:] for i in range(2)]
    assert len(srv.requests) == n_q
    rows = read_rows(prediction_file(cache))
    assert len(rows) == n_q == len({r["id"] for r in rows})
    _, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert sorted(r.data.metrics["llm_calls"] for r in runs) == [0.0, float(n_q)]


# --- 6. secrets ----------------------------------------------------------------------------------------
ENV_SECRET = "sk-envSECRETaaaaaaaaaaaaaaaa1111"
ENV_SECRET_2 = "sk-openaiENVbbbbbbbbbbbbbbbb2222"
CLI_SECRET = "sk-cliSECRETcccccccccccccccccc3333"
SECRETS = (ENV_SECRET, ENV_SECRET_2, CLI_SECRET)


def _files_containing(root: Path, needles: tuple[str, ...]) -> list[str]:
    found = []
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p}: {n}" for n in needles if n.encode() in data]
    return found


@pytest.mark.slow
def test_api_keys_appear_in_no_param_tag_artifact_hydra_file_or_output(tmp_path, dirs):
    cache, track = dirs
    srv = FakeOpenAIServer(model=MODEL, reply=short_reply).start()
    env = app_env(OPENAI_COMPAT_API_KEY=ENV_SECRET, OPENAI_API_KEY=ENV_SECRET_2)
    try:
        single = run_t2exp(gen_args(srv.base_url, 2), cache, track, env=env, process=True)  # the key from the environment
        # a sweep with the key as an override (another sampling seed: not answered from the LLM cache)
        swept = run_t2exp(
            ["-m", *gen_args(srv.base_url, 2, f"generator.api_key={CLI_SECRET}", "generator.sampling.seed=1")],
            cache,
            track,
            env=env,
            process=True,  # a secret in argv: what a real process writes is the subject
        )
    finally:
        srv.close()
    assert single.returncode == 0, single.stderr[-3000:]
    assert swept.returncode == 0, swept.stderr[-3000:]
    # the keys were really used
    assert set(srv.authorization) == {f"Bearer {ENV_SECRET}", f"Bearer {CLI_SECRET}"}

    client, runs = mlflow_runs(track)
    assert len(runs) == 3  # one run, one sweep parent, one sweep child
    for run in runs:
        assert all(s not in v for s in SECRETS for v in run.data.params.values())
        assert all(s not in v for s in SECRETS for v in run.data.tags.values())
        assert all(s not in run.info.run_name for s in SECRETS)
        art = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl" / run.info.run_id)))
        assert _files_containing(art, SECRETS) == []
    assert sorted(r.data.params.get("generator.api_key", "-") for r in runs) == ["***", "-", "None"]  # child, parent, run
    # Hydra's own files (.hydra/config.yaml, overrides.yaml, hydra.yaml, multirun.yaml, job logs),
    # the MLflow database and artifact store, and the cache
    assert (track / "hydra" / ".hydra" / "config.yaml").exists() and (track / "multirun" / "multirun.yaml").exists()
    assert _files_containing(track, SECRETS) == []
    assert _files_containing(cache, SECRETS) == []
    for proc in (single, swept):
        assert all(s not in proc.stdout + proc.stderr for s in SECRETS)


@pytest.mark.slow
def test_paper_json_answers_end_to_end(tmp_path, dirs):
    """+experiment=paper over the OpenAI wire protocol: every request carries the answer schema as
    structured output, and each prediction records the parsed JSON fields; a broken answer is no answer."""
    cache, track = dirs
    answers = iter([json.dumps({"reasoning_steps": ["a"], "final_formula": "2 * 3", "computed_formula": "6.0"}), "not json"])
    srv = FakeOpenAIServer(model=MODEL, reply=lambda messages: next(answers)).start()
    try:
        proc = run_t2exp(["+experiment=paper", *gen_args(srv.base_url, 2)], cache, track)
    finally:
        srv.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(b["response_format"]["type"] == "json_schema" for b in srv.requests) and len(srv.requests) == 2
    rows = sorted(read_rows(prediction_file(cache)), key=lambda r: r["json_valid"])
    assert rows[0]["json_valid"] is False and rows[0]["prediction"] is None
    assert rows[1]["json_valid"] is True and rows[1]["prediction"] == 6.0 and rows[1]["final_formula_value"] == 6.0


@pytest.mark.slow
def test_a_moved_cache_and_another_server_resume_the_finished_cell(tmp_path):
    """The same experiment with its cache moved and its model served elsewhere is
    the same cell: `resume=true` finds its FINISHED run and asks nothing again."""
    import shutil

    cache_a, cache_b, track = tmp_path / "a" / "cache", tmp_path / "b" / "cache", tmp_path / "track"
    first = FakeOpenAIServer(model=MODEL, reply=short_reply).start()
    try:
        proc = run_t2exp(gen_args(first.base_url, 2), cache_a, track)
    finally:
        first.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    cache_b.parent.mkdir(parents=True)
    shutil.move(str(cache_a), str(cache_b))
    second = FakeOpenAIServer(model=MODEL, reply=short_reply).start()
    try:
        proc = run_t2exp([*gen_args(second.base_url, 2, "generator.timeout=30"), "resume=true"], cache_b, track)
    finally:
        second.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert second.requests == []  # nothing asked again
    _, runs = mlflow_runs(track)
    assert [r.info.status for r in runs] == ["FINISHED"]  # skipped, not run again
    assert "already FINISHED" in proc.stdout + proc.stderr


def _popen_two_in_flight(base_url: str, n_q: int, cache: Path, track: Path) -> subprocess.Popen:
    """The run of the signal tests: two requests at a time, a long stop grace, stdout and stderr
    merged (Hydra's job log is on stdout) for reading the lines the run says."""
    args = [*gen_args(base_url, n_q), "generator.max_concurrency=2", "generator.batch_size=64"]
    return subprocess.Popen(
        app_cmd(args, cache, track),
        cwd=ROOT,
        env=app_env(T2EXP_STOP_GRACE_SECONDS="600"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_after_sigterm_nothing_more_is_sent_and_every_answer_is_a_prediction(tmp_path, dirs):
    """With max_concurrency=2 the generator sends no queued request after SIGTERM, and every answer
    that arrived is a prediction. Synchronised on events: two requests are held by the server until the app has
    logged that it is stopping; then they complete, and nothing else may be sent."""
    cache, track = dirs
    n_q, in_flight, gate = 6, threading.Barrier(3), threading.Event()
    count = iter(range(1, 100))

    def held(messages) -> str:
        if next(count) <= 2:
            in_flight.wait(120)  # both requests are in flight together, and the test knows it
            assert gate.wait(300), "the test never released the held requests"
        return short_reply(messages)

    srv = FakeOpenAIServer(model=MODEL, reply=held).start()
    try:
        proc = _popen_two_in_flight(srv.base_url, n_q, cache, track)
        try:
            in_flight.wait(300)
            proc.send_signal(signal.SIGTERM)
            _read_until(proc.stdout, "stopping after the requests in flight")
            gate.set()
            out = proc.stdout.read()
            rc = proc.wait(timeout=120)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
        assert rc == 128 + signal.SIGTERM, out[-3000:]
        assert len(srv.requests) == 2  # nothing sent after the signal
        kept = read_rows(prediction_file(cache))
        assert len(kept) == 2  # every answer that arrived is a prediction
        proc2 = run_t2exp(gen_args(srv.base_url, n_q), cache, track)
        assert proc2.returncode == 0, proc2.stderr[-3000:]
        assert len(srv.requests) == n_q  # the rest, each asked once
    finally:
        srv.close()


@pytest.mark.slow
def test_a_second_sigint_ends_the_run_at_once_with_the_answers_that_arrived(tmp_path, dirs):
    """Ctrl-C, then Ctrl-C again while a request is still in flight: the process ends at once, without
    waiting for the in-flight requests to return (the executor's threads are joined at exit), and
    keeps the answers that arrived in between. Synchronised on events: two requests are in flight; after
    the first SIGINT one is answered and written; the second SIGINT comes while the other is still
    held by the server, and the process must end without it."""
    cache, track = dirs
    n_q, in_flight, first_answer, gate = 6, threading.Barrier(3), threading.Event(), threading.Event()
    count = iter(range(1, 100))

    def held(messages) -> str:
        n = next(count)
        if n <= 2:
            in_flight.wait(120)
            if n == 1:
                assert first_answer.wait(300), "the test never let the first answer go"
            else:
                assert gate.wait(600), "the test never released the held request"
        return short_reply(messages)

    srv = FakeOpenAIServer(model=MODEL, reply=held).start()
    try:
        proc = _popen_two_in_flight(srv.base_url, n_q, cache, track)
        try:
            in_flight.wait(300)
            proc.send_signal(signal.SIGINT)
            _read_until(proc.stdout, "stopping after the requests in flight")
            first_answer.set()  # it arrives during the grace: it must be kept
            _wait_for_rows(cache, 1, proc)
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)  # the other request is still held by the server
            held_when_ended = not gate.is_set()
            out = proc.stdout.read()
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
        assert held_when_ended and rc == 128 + signal.SIGINT, out[-3000:]
        kept = read_rows(prediction_file(cache))
        assert len(kept) == 1 and len(srv.requests) == 2
        proc2 = run_t2exp(gen_args(srv.base_url, n_q), cache, track)
        assert proc2.returncode == 0, proc2.stderr[-3000:]
        assert len(srv.requests) == 2 + (n_q - 1)  # the rest, the kept answer not asked again
    finally:
        srv.close()


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_to_a_local_parallel_launcher_alone_stops_its_cells_and_closes_the_parent(tmp_path, dirs, sig):
    """hydra/launcher=local_parallel, SIGTERM to the launching process only (``kill PID``): the
    launcher does not end while its loky workers go on with their cells, and the parent run does
    not stay RUNNING. Synchronised on events: both cells have a request held by the server when the
    signal is sent; the launcher passes it on, the cells stop after their requests in flight, and
    no process of the sweep outlives it. The launcher ends with 128 + the signal and one line, not
    exit 1 and Hydra's traceback of a failed job (SIGINT alike)."""
    cache, track = dirs
    in_flight, gate = threading.Barrier(3), threading.Event()
    count = iter(range(1, 1000))

    def held(messages) -> str:
        if next(count) <= 2:
            in_flight.wait(300)  # one request of each cell in flight at once
            assert gate.wait(600), "the test never released the held requests"
        return short_reply(messages)

    srv = FakeOpenAIServer(model=MODEL, reply=held).start()
    try:
        from t2exp.tracking.mlflow_run import ensure_tracking

        ensure_tracking(f"sqlite:///{track / 'mlflow.db'}", "t2exp", str(track / "artifacts"))
        args = ["-m", *gen_args(srv.base_url, 4), "generator.sampling.seed=0,1", "hydra/launcher=local_parallel"]
        proc = subprocess.Popen(
            app_cmd(args, cache, track),
            cwd=ROOT,
            env=app_env(T2EXP_STOP_GRACE_SECONDS="600"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            in_flight.wait(600)
            proc.send_signal(sig)  # the launcher alone, not its group
            # the workers, not loky's resource tracker; bounded: should the launcher be gone while
            # its orphaned workers still hold the pipe open, a plain read would never end
            said: list[str] = []
            reader = threading.Thread(
                target=lambda: said.append(_read_until(proc.stdout, "passed on to the 2 cell processes")), daemon=True
            )
            reader.start()
            reader.join(300)
            assert said, f"the launcher did not pass the signal on (exit {proc.poll()})"
            gate.set()
            out = proc.stdout.read()
            rc = proc.wait(timeout=300)
            end = time.monotonic() + 120
            while _session_pids(proc.pid) and time.monotonic() < end:
                time.sleep(0.1)  # waiting for a condition (the workers gone), not for time to pass
            left = _session_pids(proc.pid)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
            for pid in _session_pids(proc.pid):
                os.kill(pid, signal.SIGKILL)
        assert rc == 128 + sig and left == [], (rc, left, out[-3000:])
        assert "Traceback" not in out and "Error executing job" not in out, out[-3000:]
        launcher_lines = [ln for ln in out.splitlines() if ln.startswith(f"t2exp: interrupted by {sig.name}: the sweep")]
        assert len(launcher_lines) == 1 and "run the same command again to resume" in launcher_lines[0], out[-3000:]
        client, runs = mlflow_runs(track)
        statuses = {r.data.tags.get("t2exp.sweep", "child"): [] for r in runs}
        for r in runs:
            statuses[r.data.tags.get("t2exp.sweep", "child")].append(r.info.status)
        assert statuses["parent"] == ["KILLED"] and sorted(statuses["child"]) == ["KILLED", "KILLED"], statuses
        files = sorted(cache.glob("runs/*/predictions.jsonl"))
        assert len(files) == 2 and all(len(read_rows(f)) == 1 for f in files)  # each cell's answer in flight was written
    finally:
        srv.close()
