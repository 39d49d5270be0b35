"""OpenAI-compatible, vLLM and vLLM-server generators against a real local HTTP server."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes.openai_server import FakeOpenAIServer
from helpers.paths import TESTS
from t2exp.errors import ConfigError, RemoteError
from t2exp.generators import Generation, Sampling, server_process, vllm_backend, vllm_server
from t2exp.generators.cached import CachedGenerator
from t2exp.generators.factory import make_generator
from t2exp.generators.openai_compat import OpenAICompatGenerator
from t2exp.generators.vllm_server import VLLMServerGenerator
from t2exp.infra.cache import KVCache
from t2exp.text.reasoning import split_reasoning

pytest.importorskip("openai")

FAKE_SCRIPT = TESTS / "fakes" / "openai_server.py"
MODEL = "fake-model"
GREEDY = Sampling(temperature=0.0, top_p=1.0, max_tokens=32, seed=0)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": text}]


@pytest.fixture
def fake():
    servers: list[FakeOpenAIServer] = []

    def start(**kwargs) -> FakeOpenAIServer:
        srv = FakeOpenAIServer(model=MODEL, **kwargs).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.close()


def client(srv: FakeOpenAIServer, **kwargs) -> OpenAICompatGenerator:
    opts = {"max_retries": 2, "timeout": 10.0, "backoff_base": 0.0, "api_key_env": "T2EXP_TEST_NO_SUCH_KEY"}
    opts.update(kwargs)
    return OpenAICompatGenerator("fake", MODEL, base_url=srv.base_url, provider=None, **opts)


# --- wire format, order, concurrency -----------------------------------------------------------------
def test_answers_come_back_in_input_order_under_concurrency(fake):
    srv = fake(gate_parties=4)  # the first 4 requests only return once 4 are in flight together
    gen = client(srv, max_concurrency=4)
    prompts = [ask(f"question {i}") for i in range(10)]
    out = gen.generate(prompts, GREEDY)
    assert [g.text for g in out] == [f"echo: question {i}" for i in range(10)]
    assert not srv.gate_broken
    assert srv.max_in_flight == 4
    assert srv.errors == []
    assert len(srv.requests) == 10


def test_request_and_response_fields(fake):
    srv = fake()
    gen = client(srv)
    sampling = Sampling(temperature=0.0, top_p=0.9, max_tokens=17, seed=3, stop=("\n\n",))
    (g,) = gen.generate([ask("what is 6 times 7")], sampling)
    body = srv.requests[0]
    assert body["model"] == MODEL
    assert body["messages"] == ask("what is 6 times 7")
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"], body["stop"]) == (0.0, 0.9, 17, 3, ["\n\n"])
    assert g.text == "echo: what is 6 times 7"
    assert (g.prompt_tokens, g.completion_tokens) == (4 + 5, 6)
    assert g.finish_reason == "stop" and g.seconds > 0 and g.extra == {}
    assert srv.authorization == ["Bearer EMPTY"]  # a local server without a key gets "EMPTY"


def test_samples_are_one_more_request_with_n_choices(fake):
    """sampling.samples=4: the main request as before, then one request for n=3 choices at the
    sample temperature (next seed); their texts land in extra["samples"]."""
    counter = iter(range(100))
    srv = fake(reply=lambda msgs: f"Program: {next(counter)}")
    sampling = Sampling(temperature=0.0, max_tokens=17, seed=3, samples=4, sample_temperature=0.6)
    (g,) = client(srv).generate([ask("x")], sampling)
    main, more = srv.requests
    assert "n" not in main and main["temperature"] == 0.0 and main["seed"] == 3
    assert (more["n"], more["temperature"], more["seed"], more["max_tokens"]) == (3, 0.6, 4, 17)
    assert g.text == "Program: 0" and g.extra["samples"] == ["Program: 1", "Program: 2", "Program: 3"]
    (one,) = client(srv).generate([ask("y")], GREEDY)
    assert "samples" not in one.extra and len(srv.requests) == 3


def test_finish_reason_length_is_propagated(fake):
    srv = fake(script=["ok", "length"])
    out = client(srv, max_concurrency=1).generate([ask("a"), ask("b")], GREEDY)
    assert [g.finish_reason for g in out] == ["stop", "length"]


def test_empty_prompt_list_makes_no_request(fake):
    srv = fake()
    assert client(srv).generate([], GREEDY) == []
    assert srv.requests == []


# --- retries and errors -------------------------------------------------------------------------------
def test_429_then_success_is_retried(fake):
    srv = fake(script=["429", "ok"])
    (g,) = client(srv).generate([ask("q")], GREEDY)
    assert g.text == "echo: q"
    assert len(srv.requests) == 2


def test_5xx_then_success_is_retried(fake):
    srv = fake(script=["502", "503", "ok"])
    (g,) = client(srv, max_retries=2).generate([ask("q")], GREEDY)
    assert g.text == "echo: q" and len(srv.requests) == 3


def test_persistent_500_raises_one_line_remote_error(fake):
    srv = fake(default="500")
    with pytest.raises(RemoteError) as err:
        client(srv, max_retries=2).generate([ask("q")], GREEDY)
    msg = str(err.value)
    assert "\n" not in msg
    assert srv.base_url in msg and "HTTP 500" in msg and "after 3 attempts" in msg and "log" in msg
    assert len(srv.requests) == 3


def test_server_that_never_answers_times_out(fake):
    srv = fake(default="hang")
    with pytest.raises(RemoteError, match=r"timeout.*generator\.timeout") as err:
        client(srv, timeout=0.2, max_retries=1).generate([ask("q")], GREEDY)
    assert "\n" not in str(err.value)
    assert len(srv.requests) == 2


def test_malformed_json_is_retried_then_fails(fake):
    srv = fake(default="malformed")
    with pytest.raises(RemoteError, match="malformed response") as err:
        client(srv, max_retries=2).generate([ask("q")], GREEDY)
    assert srv.base_url in str(err.value)
    assert len(srv.requests) == 3


def test_malformed_once_then_success(fake):
    srv = fake(script=["malformed", "ok"])
    (g,) = client(srv).generate([ask("q")], GREEDY)
    assert g.text == "echo: q" and len(srv.requests) == 2


def test_unknown_model_is_not_retried(fake):
    srv = fake()
    gen = OpenAICompatGenerator("fake", "other-model", base_url=srv.base_url, provider=None, max_retries=3, backoff_base=0.0)
    with pytest.raises(RemoteError, match=r"HTTP 404.*generator\.model='other-model'"):
        gen.generate([ask("q")], GREEDY)
    assert len(srv.requests) == 1


def test_connection_refused_names_the_endpoint():
    url = f"http://127.0.0.1:{server_process.free_port()}/v1"
    gen = OpenAICompatGenerator("fake", MODEL, base_url=url, max_retries=1, backoff_base=0.0)
    with pytest.raises(RemoteError, match=r"127\.0\.0\.1.*connection error.*server running"):
        gen.generate([ask("q")], GREEDY)


def test_one_failure_fails_the_batch(fake):
    srv = fake(script=["ok", "400", "ok", "ok"])
    with pytest.raises(RemoteError, match="HTTP 400"):
        client(srv, max_concurrency=1).generate([ask(str(i)) for i in range(4)], GREEDY)


# --- keys -----------------------------------------------------------------------------------------------
def test_hosted_api_without_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAICompatGenerator("gpt", "gpt-4o-mini", provider="openai")


def test_key_from_env_is_sent(fake, monkeypatch):
    srv = fake()
    monkeypatch.setenv("T2EXP_TEST_KEY", "sk-test")
    client(srv, api_key_env="T2EXP_TEST_KEY").generate([ask("q")], GREEDY)
    assert srv.authorization == ["Bearer sk-test"]


# --- reasoning models -------------------------------------------------------------------------------
def test_think_block_is_stripped_for_reasoning_models(fake):
    raw = "<think>six times seven is forty two</think>\nFinal answer: 42"
    srv = fake(reply=lambda messages: raw)
    (g,) = client(srv, reasoning=True).generate([ask("q")], GREEDY)
    assert g.text == "Final answer: 42"
    assert g.extra["raw"] == raw
    assert g.extra["reasoning_tokens"] == 6
    (plain,) = client(srv, reasoning=False).generate([ask("q")], GREEDY)
    assert plain.text == raw and "raw" not in plain.extra


def test_reasoning_generation_round_trips_through_the_llm_cache(fake, tmp_path):
    srv = fake(reply=lambda messages: "<think>hmm</think>Final answer: 1")
    cached = CachedGenerator(client(srv, reasoning=True), KVCache(tmp_path / "llm.sqlite"))
    first = cached.generate([ask("q")], GREEDY)
    second = cached.generate([ask("q")], GREEDY)
    assert len(srv.requests) == 1 and second[0].cached
    assert second[0].text == first[0].text == "Final answer: 1"
    assert second[0].extra == {"raw": "<think>hmm</think>Final answer: 1", "reasoning_tokens": 1}


@pytest.mark.parametrize(
    ("text", "answer", "thought"),
    [
        ("<think>a b</think>Final answer: 3", "Final answer: 3", "a b"),
        ("a b c</think>\nFinal answer: 3", "Final answer: 3", "a b c"),  # template opened the block
        ("<think>cut off in the middle", "", "cut off in the middle"),
        ("<THINK>x</THINK> y <think>z</think> w", "y   w", "x\nz"),
        ("no reasoning at all", "no reasoning at all", ""),
    ],
)
def test_split_reasoning(text, answer, thought):
    assert split_reasoning(text) == (answer, thought)


# --- factory ------------------------------------------------------------------------------------------
def test_factory_dispatches_and_drops_other_backends_keys(fake):
    srv = fake()
    gen = make_generator(
        backend="openai",
        name="llama",
        model=MODEL,
        base_url=srv.base_url,
        provider=None,
        tensor_parallel_size=2,
        max_model_len=4096,
        startup_timeout=5,
        command=None,
    )
    assert isinstance(gen, OpenAICompatGenerator)
    assert gen.generate([ask("q")], GREEDY)[0].text == "echo: q"
    server_gen = make_generator(
        backend="vllm_server", name="x", model=MODEL, command=[sys.executable, str(FAKE_SCRIPT)], base_url="ignored"
    )
    assert isinstance(server_gen, VLLMServerGenerator) and server_gen._server is None  # started on first use only


def test_factory_rejects_unknown_keys():
    # an unknown backend is refused by the config schema (test_reliability_config: generator.backend=tgi)
    with pytest.raises(ConfigError, match="generator.tensor_paralel_size"):
        make_generator(backend="openai", name="x", model="m", base_url="http://127.0.0.1:1/v1", tensor_paralel_size=2)


def test_vllm_backend_without_vllm_is_a_config_error(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)
    with pytest.raises(ConfigError, match=re.escape("t2exp[vllm]")):
        make_generator(backend="vllm", name="llama", model="kosbu/Llama-3.3-70B-Instruct-AWQ")
    monkeypatch.setattr(vllm_server, "vllm_available", lambda: False)
    with pytest.raises(ConfigError, match=re.escape("t2exp[vllm]")):
        make_generator(backend="vllm_server", name="llama", model="kosbu/Llama-3.3-70B-Instruct-AWQ")


def test_vllm_fingerprint_is_shared_by_both_vllm_backends(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    a = vllm_backend.VLLMGenerator("a", "org/model", tensor_parallel_size=2)
    b = VLLMServerGenerator("b", "org/model", command=["true"], port=1234)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != vllm_backend.VLLMGenerator("c", "org/model", reasoning=True).fingerprint


# --- vLLM server subprocess ---------------------------------------------------------------------------
def _pid_from_log(path: Path) -> int:
    m = re.search(r"fake server: pid=(\d+)", path.read_text())
    assert m, path.read_text()
    return int(m.group(1))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _server_gen(tmp_path: Path, *extra: str, **kwargs) -> VLLMServerGenerator:
    opts = {"startup_timeout": 60.0, "poll_interval": 0.05, "backoff_base": 0.0}
    opts.update(kwargs)
    return VLLMServerGenerator(
        "fake-server", MODEL, command=[sys.executable, str(FAKE_SCRIPT)], extra_args=list(extra), cache_dir=str(tmp_path), **opts
    )


@pytest.fixture
def no_server_left():
    yield
    vllm_server._stop_server()


def test_vllm_server_starts_waits_for_health_serves_and_is_killed(tmp_path, no_server_left):
    gen = _server_gen(tmp_path, "--not-ready-for", "3", tensor_parallel_size=2, max_model_len=2048)
    out = gen.generate([ask("one"), ask("two")], GREEDY)
    assert [g.text for g in out] == ["echo: one", "echo: two"]
    (log_path,) = (tmp_path / "logs").glob("vllm_server-fake-server-*.log")
    text = log_path.read_text()
    assert "--tensor-parallel-size 2" in text and "--max-model-len 2048" in text and "--host 127.0.0.1" in text
    pid = _pid_from_log(log_path)
    assert not _gone(pid)
    # a second generator with the same settings reuses the running server
    again = _server_gen(tmp_path, "--not-ready-for", "3", tensor_parallel_size=2, max_model_len=2048)
    assert again.generate([ask("three")], GREEDY)[0].text == "echo: three"
    assert again._server is gen._server
    gen.close()
    assert _gone(pid)
    assert vllm_server._SERVER is None


def test_vllm_server_dies_with_a_killed_t2exp(tmp_path):
    """SIGKILL of the process that started the server (no atexit, no signal handler runs) still
    stops the server: the orphan guard's parent-death signal (Linux)."""
    import select
    import subprocess

    code = (
        "import sys; sys.path[:0] = sys.argv[1:3];"
        "from test_openai_generator import _server_gen, ask, GREEDY; from pathlib import Path;"
        "out = _server_gen(Path(sys.argv[3])).generate([ask('one')], GREEDY); print(out[0].text, flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(TESTS), str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "echo: one"  # the server answered
        (log_path,) = (tmp_path / "logs").glob("vllm_server-fake-server-*.log")
        pid = _pid_from_log(log_path)
        fd = os.pidfd_open(pid)
        child.kill()
        child.wait(timeout=30)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        assert poller.poll(30_000), f"server {pid} still running 30 s after its parent was killed"
        os.close(fd)
    finally:
        if child.poll() is None:
            child.kill()


def test_vllm_server_with_other_settings_replaces_the_running_one(tmp_path, no_server_left):
    first = _server_gen(tmp_path)
    first.generate([ask("a")], GREEDY)
    pid = _pid_from_log(next((tmp_path / "logs").glob("*.log")))
    second = _server_gen(tmp_path, "--enable-prefix-caching")
    assert second.generate([ask("b")], GREEDY)[0].text == "echo: b"
    assert _gone(pid)


def test_vllm_server_is_stopped_at_exit(tmp_path, no_server_left):
    gen = _server_gen(tmp_path)
    gen.generate([ask("a")], GREEDY)
    pid = _pid_from_log(next((tmp_path / "logs").glob("*.log")))
    vllm_server._stop_server()  # what atexit runs
    assert _gone(pid)


def test_fake_server_delay_holds_every_answer_in_process_and_as_a_script(fake, tmp_path, no_server_left):
    # the stand-in generator of benchmarks/shards.py: each answer waits `delay` seconds (a lower
    # bound, whatever the machine's load), requests in flight together wait together
    srv = fake(delay=0.4, gate_parties=2)
    t0 = time.monotonic()
    out = client(srv, max_concurrency=2).generate([ask("a"), ask("b")], GREEDY)
    assert time.monotonic() - t0 >= 0.4
    assert [g.text for g in out] == ["echo: a", "echo: b"] and srv.max_in_flight == 2 and not srv.gate_broken
    gen = _server_gen(tmp_path, "--delay", "0.4")
    gen.generate([ask("warm")], GREEDY)  # the server's start-up is not part of an answer
    t0 = time.monotonic()
    assert gen.generate([ask("c")], GREEDY)[0].text == "echo: c"
    assert time.monotonic() - t0 >= 0.4


def test_vllm_server_crash_reports_the_log_tail(tmp_path, no_server_left):
    gen = _server_gen(tmp_path, "--crash", "CUDA out of memory while loading weights")
    with pytest.raises(RemoteError) as err:
        gen.generate([ask("a")], GREEDY)
    msg = str(err.value)
    assert "\n" not in msg
    assert "exited with code 1" in msg and "CUDA out of memory while loading weights" in msg and str(tmp_path) in msg


def test_vllm_server_that_crashed_leaves_no_child_behind(tmp_path, no_server_left):
    """vLLM's engine core is a child of the server: when the server dies first, stop() still kills
    the rest of its process group, not only the server itself."""
    gen = _server_gen(tmp_path, "--orphan", "--crash", "engine core failed")
    with pytest.raises(RemoteError, match=r"exited with code 1.*RuntimeError: engine core failed"):
        gen.generate([ask("a")], GREEDY)
    log_text = next((tmp_path / "logs").glob("*.log")).read_text()
    m = re.search(r"fake engine: pid=(\d+)", log_text)
    assert m, log_text
    stat = Path(f"/proc/{m.group(1)}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # gone, or a zombie awaiting its reaper


def test_vllm_server_never_ready_times_out_and_is_killed(tmp_path, no_server_left, monkeypatch):
    started: list[subprocess.Popen] = []
    real_start = server_process.ServerProcess.start

    def recording_start(self):
        real_start(self)
        started.append(self.proc)

    monkeypatch.setattr(server_process.ServerProcess, "start", recording_start)
    gen = _server_gen(tmp_path, "--never-ready", startup_timeout=1.0)
    # (HTTP 503) once the stand-in listens; a connection error when a loaded machine starts it later than 1 s
    with pytest.raises(RemoteError, match=r"not ready after 1s \((HTTP 503|URLError)\).*startup_timeout") as err:
        gen.generate([ask("a")], GREEDY)
    assert "\n" not in str(err.value)
    # the pid comes from the process handle, not the log: a loaded machine may not have run the script's first line within 1 s
    (proc,) = started
    assert proc.poll() is not None  # exited and reaped
    assert not server_process.group_alive(proc.pid)  # and nothing of its process group is left
    assert vllm_server._SERVER is None


def test_vllm_server_bad_command_is_a_config_error(tmp_path):
    gen = VLLMServerGenerator("x", MODEL, command=[str(tmp_path / "no-such-python")], cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="generator.command"):
        gen.generate([ask("a")], GREEDY)


# --- real vLLM (GPU machines) ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (pip install t2exp[vllm] on a GPU machine)")
def test_vllm_in_process_generates_in_one_batch():
    model = os.environ.get("T2EXP_VLLM_TEST_MODEL", "Qwen/Qwen2.5-0.5B-Instruct")
    gen = vllm_backend.VLLMGenerator("vllm-test", model, max_model_len=2048, gpu_memory_utilization=0.5, enforce_eager=True)
    prompts = [ask(f"What is {i} plus {i}? Reply with the number only.") for i in range(4)]
    out = gen.generate(prompts, Sampling(max_tokens=16))
    assert len(out) == 4 and all(isinstance(g, Generation) for g in out)
    assert all(g.prompt_tokens > 0 and 0 < g.completion_tokens <= 16 for g in out)
    assert all(g.finish_reason in ("stop", "length") for g in out)
    cut = gen.generate(prompts[:1], Sampling(max_tokens=1))
    assert cut[0].finish_reason == "length" and cut[0].completion_tokens == 1


def test_cached_generator_keeps_finished_answers_of_a_failed_batch(tmp_path):
    """A batch whose last request fails for good: the answers that did arrive are in the LLM
    cache, so the re-run sends only the failed request."""
    from fakes.openai_server import FakeOpenAIServer
    from t2exp.errors import RemoteError
    from t2exp.generators import Sampling
    from t2exp.generators.cached import CachedGenerator
    from t2exp.generators.openai_compat import OpenAICompatGenerator
    from t2exp.infra.cache import KVCache

    prompts = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]
    with FakeOpenAIServer(model="m", script=["ok", "ok", "500"]) as srv:
        inner = OpenAICompatGenerator(
            "g", model="m", base_url=srv.base_url, api_key="x", max_concurrency=1, max_retries=0, backoff_base=0.0, batch_size=64
        )
        gen = CachedGenerator(inner, KVCache(tmp_path / "llm.sqlite"))
        with pytest.raises(RemoteError):
            gen.generate(prompts, Sampling(max_tokens=8))
        assert len(gen.cache) == 2
        again = gen.generate(prompts, Sampling(max_tokens=8))
        assert len(srv.requests) == 4  # 3 in the failed batch + only the missing one
        assert [g.cached for g in again] == [True, True, False]


def test_vllm_server_keeps_finished_answers_of_a_failed_batch(tmp_path, no_server_left):
    """generator=vllm_server forwards on_result: a batch whose last request fails for good leaves
    the answers that arrived in the LLM cache."""
    from t2exp.errors import RemoteError
    from t2exp.generators.cached import CachedGenerator
    from t2exp.infra.cache import KVCache

    inner = _server_gen(tmp_path, "--script", "ok,ok,500", max_concurrency=1, max_retries=0)
    gen = CachedGenerator(inner, KVCache(tmp_path / "llm.sqlite"))
    prompts = [ask(f"q{i}") for i in range(3)]
    with pytest.raises(RemoteError):
        gen.generate(prompts, GREEDY)
    assert len(gen.cache) == 2
    again = gen.generate(prompts, GREEDY)
    assert [g.cached for g in again] == [True, True, False]
    inner.close()


def test_vllm_server_that_dies_mid_run_is_named_with_its_log(tmp_path, no_server_left):
    """A server that exits during a batch: the answers that arrived are kept, and the error names the
    server's exit and its log, not a connection error pointing at generator.base_url."""
    from t2exp.errors import RemoteError
    from t2exp.generators.cached import CachedGenerator
    from t2exp.infra.cache import KVCache

    inner = _server_gen(tmp_path, "--script", "ok,exit", max_concurrency=1, max_retries=0)
    gen = CachedGenerator(inner, KVCache(tmp_path / "llm.sqlite"))
    with pytest.raises(RemoteError, match=r"vllm server exited with code 3 during the run; log .*vllm_server-fake-server-\d+\.log"):
        gen.generate([ask("q0"), ask("q1")], GREEDY)
    assert len(gen.cache) == 1
    inner.close()


def test_cache_fingerprint_names_the_weights_not_only_the_id():
    """Two servers serving different weights under one model id must not share LLM-cache entries
    (the fingerprint is more than the id); the same weights on another port do."""
    with (
        FakeOpenAIServer(model=MODEL, root="/models/a") as a,
        FakeOpenAIServer(model=MODEL, root="/models/b") as b,
        FakeOpenAIServer(model=MODEL, root="/models/a") as a2,
    ):
        fa, fb, fa2 = (client(s).fingerprint for s in (a, b, a2))
        assert fa != fb
        assert fa == fa2
        pinned = [client(s, model_revision="sha256:1234").fingerprint for s in (a, b)]
        assert pinned[0] == pinned[1] != fa


def test_group_members_lists_a_real_group_and_session_and_skips_zombies():
    """The process-group listing behind group_alive (and the live vLLM tests' leftover check): a child in
    its own session is found by group and by session; once it has exited and is not yet reaped (a
    zombie) it is not."""
    from t2exp.infra import signals

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, start_new_session=True)
    try:
        assert [m.split()[0] for m in signals.group_members(child.pid)] == [str(child.pid)]
        assert signals.group_members(child.pid, session=True) == signals.group_members(child.pid)
        assert signals.group_alive(child.pid)
        assert child.stdin is not None
        child.stdin.close()  # it reads EOF and exits
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie in /proc
        assert (Path("/proc") / str(child.pid)).exists()
        assert signals.group_members(child.pid) == [] and not signals.group_alive(child.pid)
    finally:
        child.kill()
        child.wait()
