"""A secret given any way the app takes one — a tracking server's login in ``tracking.uri``, a
login in ``generator.base_url``, an API key on the command line, a key in a variable named by
``generator.api_key_env`` — is in no byte that t2exp, MLflow or Hydra print or write during a run,
a sweep, ``t2exp reproduce``, ``t2exp collect`` and ``t2exp status``.

The tracking server is a real ``mlflow server`` (it takes any login: the point is what the client
is given and prints); the model is the stand-in OpenAI server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakes.openai_server import FakeOpenAIServer
from helpers.app import app_overrides
from helpers.command import cli
from helpers.tracking import MlflowServer

pytest.importorskip("openai")
pytestmark = [pytest.mark.slow, pytest.mark.full]  # a tracking server and six commands

PASSWORD = "tracking-pw-31337"  # tracking.uri=http://user:PASSWORD@host:port
BASE_URL_PASSWORD = "base-url-pw-2718"  # generator.base_url=http://user:PASSWORD@host:port/v1
CLI_KEY = "key-on-the-command-line-777"  # generator.api_key=...
ENV_KEY = "cred-4242-from-a-plain-var"  # generator.api_key_env=MY_LLM_CRED
SECRETS = (PASSWORD, BASE_URL_PASSWORD, CLI_KEY, ENV_KEY)


def _files_holding_a_secret(root: Path) -> list[str]:
    return [f"{p}: {s}" for p in sorted(root.rglob("*")) if p.is_file() for s in SECRETS if s.encode() in p.read_bytes()]


def test_no_secret_reaches_any_byte_printed_or_written(tmp_path):
    from t2exp.__main__ import main

    server = MlflowServer(tmp_path / "server")
    server.start()
    llm = FakeOpenAIServer(model="m").start()
    host = llm.base_url.split("://", 1)[1]
    secret_args = [
        "rag_method=oracle",
        "dataset=finqa",
        "dataset.limit=1",
        "generator=openai_compat",
        f"generator.base_url=http://llm:{BASE_URL_PASSWORD}@{host}",
        "generator.model=m",
        "generator.api_key_env=MY_LLM_CRED",
        "generator.max_retries=0",
        f"tracking.uri=http://me:{PASSWORD}@{server.uri.split('://', 1)[1]}",
    ]
    cache, track, keep = tmp_path / "cache", tmp_path / "track", tmp_path / "keep"
    track.mkdir()
    env = {"MY_LLM_CRED": ENV_KEY, "T2EXP_PROGRESS": "0"}

    def app(*args: str) -> subprocess.CompletedProcess:
        """A real process: the secrets are in its argv (and a sweep's end, its exit, talks to the server)."""
        argv = [sys.executable, "-m", "t2exp", *app_overrides(cache, track), *secret_args, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=track, env={**os.environ, **env})

    expected = tmp_path / "expected"
    expected.mkdir()
    condition = {"name": "c", "overrides": [*secret_args, f"generator.api_key={CLI_KEY}", "experiment_name=reproduced"]}
    (expected / "t.yaml").write_text(yaml.safe_dump({"conditions": [{**condition, "expected": {"avg/nm": 50}, "tolerance": 50}]}))

    def clean(name: str, proc) -> str:
        assert proc.returncode == 0, (name, proc.stdout[-2000:], proc.stderr[-3000:])
        assert [s for s in SECRETS if s in proc.stdout + proc.stderr] == [], (name, proc.stdout[-3000:])
        return proc.stdout + proc.stderr

    try:
        clean("run", app())
        clean("sweep", app("-m", f"generator.api_key={CLI_KEY}", "generator.sampling.seed=1,2"))
        clean("sharded", app("shards=2", "generator.sampling.seed=3", f"hydra.sweep.dir={track / 'sharded'}"))
        (shards,) = cache.glob("runs/*/shards")  # the one sharded cell's
        collected = clean("collect", cli(main, ["collect", str(shards.parent)], env=env, cwd=track))
        clean("status", cli(main, ["status", str(track / "multirun")], env=env, cwd=track))
        reproduced = clean(
            "reproduce", cli(main, ["reproduce", "t/c", "--expected", str(expected), "--keep", str(keep)], env=env, cwd=tmp_path)
        )
    finally:
        llm.close()
        server.kill()
    assert "already FINISHED" in collected and "1 OK" in reproduced
    assert (keep / "t" / "c" / "t2exp.log").is_file() and (track / "multirun" / "multirun.yaml").is_file()
    # paths.work (Hydra's files, the MLflow artifacts), the cache, the --keep folder, the server's store and artifacts
    assert [f for root in (track, cache, keep, server.log.parent) for f in _files_holding_a_secret(root)] == []
