"""A model server as a child process: started in its own process group behind the orphan guard
(:mod:`t2exp.generators._orphan_guard`), its output in a log file, polled until it serves, and
stopped with its whole group (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from t2exp.errors import ConfigError, RemoteError
from t2exp.infra.signals import group_alive, stop_process

log = logging.getLogger("t2exp.generators.vllm_server")

EXIT_GRACE_SECONDS = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# a vLLM log prefix: "(EngineCore pid=9) ERROR 12-01 10:00:00 [core.py:9] "
_PREFIX = re.compile(r"^\(\w+ pid=\d+\)\s*(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]*\]\s*)?")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit): \S")


def log_tail(path: Path, lines: int = 6, limit: int = 600) -> str:
    """What a failed server said, on one line: the last exception lines of its log (a traceback's
    ``SomeError: message``; at most two, e.g. vLLM's "Engine core initialization failed" and its
    root cause), else its last non-empty lines (minus the ``$ command`` lines)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 32768))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    kept = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
    errors: list[str] = []
    for ln in kept:
        ln = _PREFIX.sub("", ln)
        if _EXCEPTION.match(ln):
            errors = [e for e in errors if e != ln] + [ln]
    tail = " | ".join(errors[-2:] or kept[-lines:]) or "(empty log)"
    return tail if len(tail) <= limit else tail[: limit - 1] + "…"


class ServerProcess:
    """One server subprocess: start, wait until ready, stop."""

    def __init__(self, argv: list[str], host: str, port: int, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.host = host
        self.port = port
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as logf:
            logf.write(f"$ {' '.join(self.argv)}\n".encode())
            logf.flush()
            if shutil.which(self.argv[0]) is None:
                raise ConfigError(f"generator.command: cannot start {self.argv[0]!r} (not found or not executable)")
            # through the orphan guard: the server gets SIGTERM if this process dies without stopping it
            guarded = [sys.executable, "-m", "t2exp.generators._orphan_guard", str(os.getpid()), *self.argv]
            try:
                self.proc = subprocess.Popen(
                    guarded,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **(self.env or {})},
                    start_new_session=True,  # its own process group: tensor-parallel workers die with it
                )
            except OSError as exc:
                raise ConfigError(f"generator.command: cannot start {self.argv[0]!r} ({exc})") from None

    def wait_ready(self, model: str, timeout: float, poll_interval: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            assert self.proc is not None
            rc = self.proc.poll()
            if rc is not None:
                raise RemoteError(f"vllm server exited with code {rc} before it was ready; log {self.log_path}: {log_tail(self.log_path)}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=max(1.0, poll_interval)) as resp:
                    ids = [m.get("id") for m in json.loads(resp.read()).get("data", [])]
                if model in ids:
                    return
                last = f"serves {ids}, not {model!r}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                last = type(exc).__name__
            if time.monotonic() >= deadline:
                self.stop()
                raise RemoteError(
                    f"vllm server at {self.base_url} not ready after {timeout:g}s ({last}); raise generator.startup_timeout "
                    f"or read the log {self.log_path}: {log_tail(self.log_path)}"
                )
            time.sleep(poll_interval)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the server's whole process group, SIGKILL what is left after ``grace`` seconds.

        The group, not only the server: vLLM's engine core and workers are its children and can
        outlive it (a crashed server leaves them running), so this waits until none is left."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_process(proc, grace, term_group=True)  # start_new_session: the server leads its own process group
        if proc.poll() is None or group_alive(proc.pid):
            log.warning("vllm server process group %d is still alive after SIGKILL; log %s", proc.pid, self.log_path)
