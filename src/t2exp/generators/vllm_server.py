"""A vLLM OpenAI-compatible server started for the run, then talked to over HTTP.

The server is ``python -m vllm.entrypoints.openai.api_server`` by default (``vllm serve`` is
broken in some builds); ``command`` replaces that prefix, e.g. a python from another venv. It
starts on the first ``generate`` (a run answered fully from the LLM cache never starts it),
logs to ``<cache_dir>/logs/``, is polled on GET /v1/models until ready, and is killed (its
whole process group) on ``close()`` or at interpreter exit.

One server per process at a time: a generator with the same settings reuses the running
server (sequential Hydra multirun jobs), one with other settings stops it first.
"""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from t2exp.errors import ConfigError, RemoteError
from t2exp.generators import Generation, Messages, OnResult, Sampling, ShouldStop
from t2exp.generators.openai_compat import OpenAICompatGenerator
from t2exp.generators.server_process import EXIT_GRACE_SECONDS, ServerProcess, free_port, log_tail
from t2exp.generators.vllm_backend import INSTALL_HINT, vllm_available, vllm_fingerprint

log = logging.getLogger(__name__)
DEFAULT_COMMAND = (sys.executable, "-m", "vllm.entrypoints.openai.api_server")


_SERVERS_LOCK = threading.Lock()
_SERVER: tuple[tuple, ServerProcess] | None = None


def _stop_server() -> None:
    global _SERVER
    with _SERVERS_LOCK:
        if _SERVER is not None:
            _SERVER[1].stop()
            _SERVER = None


atexit.register(_stop_server)


def _check_backend(name: str, model: str, command: list[str] | str | None) -> None:
    """A model to serve, and a python with vLLM to serve it (this one's, or ``generator.command``)."""
    if not model:
        raise ConfigError(f"generator={name}: generator.model is empty; set a Hugging Face id or a local path")
    if command is None and not vllm_available():
        raise ConfigError(
            f"generator={name}: backend vllm_server needs the vllm package; {INSTALL_HINT}, "
            "or set generator.command to a python that has it"
        )


class VLLMServerGenerator:
    def __init__(
        self,
        name: str,
        model: str,
        *,
        served_model_name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = 16384,
        gpu_memory_utilization: float = 0.9,
        quantization: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enforce_eager: bool = False,
        extra_args: list[str] | None = None,
        command: list[str] | str | None = None,
        env: dict[str, str] | None = None,
        cache_dir: str = ".t2exp_cache",
        startup_timeout: float = 1800.0,
        poll_interval: float = 2.0,
        reasoning: bool = False,
        max_concurrency: int = 8,
        max_retries: int = 4,
        timeout: float = 120.0,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        batch_size: int = 64,
    ) -> None:
        _check_backend(name, model, command)
        self.name = name
        self.model = model
        self.served_model_name = served_model_name or model
        self.host = host
        self.port = int(port)
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.gpus = self.tensor_parallel_size  # what a cell's gpu_seconds counts
        self.max_model_len = int(max_model_len) if max_model_len else None
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.quantization = quantization
        self.dtype = dtype
        self.seed = int(seed)
        self.enforce_eager = bool(enforce_eager)
        self.extra_args = [str(a) for a in (extra_args or [])]
        if isinstance(command, str):
            command = shlex.split(command)
        self.command = [str(c) for c in (command or DEFAULT_COMMAND)]
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.cache_dir = Path(cache_dir)
        self.startup_timeout = float(startup_timeout)
        self.poll_interval = float(poll_interval)
        self.reasoning = bool(reasoning)
        self.client_kwargs: dict[str, Any] = dict(
            max_concurrency=max_concurrency, max_retries=max_retries, timeout=timeout, backoff_base=backoff_base, backoff_max=backoff_max
        )
        self.batch_size = int(batch_size)
        self._client: OpenAICompatGenerator | None = None
        self._server: ServerProcess | None = None

    @property
    def fingerprint(self) -> str:
        return vllm_fingerprint(self.model, self.quantization, self.dtype, self.reasoning)

    def argv(self, port: int) -> list[str]:
        args = [*self.command, "--model", self.model, "--host", self.host, "--port", str(port)]
        args += ["--tensor-parallel-size", str(self.tensor_parallel_size), "--dtype", self.dtype, "--seed", str(self.seed)]
        args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.served_model_name != self.model:
            args += ["--served-model-name", self.served_model_name]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.quantization:
            args += ["--quantization", self.quantization]
        if self.enforce_eager:
            args.append("--enforce-eager")
        return args + self.extra_args

    def _settings_key(self) -> tuple:
        return (tuple(self.argv(self.port)), tuple(sorted(self.env.items())))

    def start(self) -> ServerProcess:
        """Start the server (or reuse the running one with the same settings) and wait until ready."""
        global _SERVER
        key = self._settings_key()
        with _SERVERS_LOCK:
            if _SERVER is not None and _SERVER[0] == key and _SERVER[1].alive():
                server = _SERVER[1]
            else:
                if _SERVER is not None:
                    log.info("stopping the vLLM server at %s for a new configuration", _SERVER[1].base_url)
                    _SERVER[1].stop()
                    _SERVER = None
                port = self.port or free_port(self.host)
                safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in self.name)
                log_path = self.cache_dir / "logs" / f"vllm_server-{safe}-{port}.log"
                server = ServerProcess(self.argv(port), self.host, port, log_path, self.env)
                log.info("starting vLLM server for %s on port %d (log: %s)", self.model, port, log_path)
                t0 = time.monotonic()
                server.start()
                try:
                    server.wait_ready(self.served_model_name, self.startup_timeout, self.poll_interval)
                except BaseException:
                    server.stop()
                    raise
                log.info("vLLM server ready in %.1fs", time.monotonic() - t0)
                _SERVER = (key, server)
        if self._server is not server or self._client is None:
            self._server = server
            self._client = OpenAICompatGenerator(
                self.name,
                self.served_model_name,
                base_url=server.base_url,
                # vLLM reads VLLM_API_KEY itself; send it when the server was started with one
                api_key=self.env.get("VLLM_API_KEY") or os.environ.get("VLLM_API_KEY") or "EMPTY",
                api_key_env="",
                provider=None,
                reasoning=self.reasoning,
                batch_size=self.batch_size,
                **self.client_kwargs,
            )
        return server

    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        if not prompts:
            return []
        if self._server is None or not self._server.alive() or self._client is None:
            self.start()
        assert self._client is not None
        try:
            return self._client.generate(prompts, sampling, on_result=on_result, should_stop=should_stop)
        except RemoteError as err:
            server = self._server
            if server is None or server.proc is None:
                raise
            try:  # a killed server's sockets close a moment before its exit status exists: wait for that
                server.proc.wait(timeout=EXIT_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                raise err from None  # the server is alive: the request failed for another reason

            # the answers that arrived were delivered (on_result); say why the rest did not
            raise RemoteError(
                f"vllm server exited with code {server.proc.returncode} during the run; log {server.log_path}: {log_tail(server.log_path)}"
            ) from None

    def close(self) -> None:
        """Stop the server this generator uses (if it is still the running one)."""
        global _SERVER
        with _SERVERS_LOCK:
            if self._server is not None:
                self._server.stop()
                if _SERVER is not None and _SERVER[1] is self._server:
                    _SERVER = None
        if self._client is not None:
            self._client.close()
        self._server = None
        self._client = None
