"""A stdlib HTTP server speaking the OpenAI chat-completions wire format, for tests.

In-process use::

    with FakeOpenAIServer(model="m", script=["429", "ok"]) as srv:
        OpenAI(base_url=srv.base_url, api_key="x").chat.completions.create(...)

Each POST /v1/chat/completions takes the next action of ``script`` (then ``default``):

- ``"ok"``: a chat completion whose content is ``reply(messages)`` (default ``"echo: <last user
  message>"``), finish_reason "stop"; ``"length"``: the same with finish_reason "length";
- ``"malformed"``: status 200, content type JSON, a body that is not JSON;
- ``"hang"``: no answer until ``release`` is set (``close()`` sets it);
- ``"429"``, ``"500"``, any other digits: that status with an OpenAI-style error body;
- ``"exit"`` (script mode only): the process exits (status 3) without answering, as a server killed mid-run.

``delay`` (seconds, default 0) holds every chat answer that long before it is sent, each request in
its own thread, so requests in flight together wait together: a stand-in for a generator's time per
answer (``benchmarks/shards.py``).

Requests are checked (model, messages of {role, content}, numeric temperature, integer
max_tokens); a bad one gets 400/404 and its reason lands in ``errors``. ``gate_parties`` makes
the first N requests wait on a ``threading.Barrier`` of N parties, so a test can prove N requests
were in flight together. GET /v1/models lists ``model`` (with ``root``, as vLLM does, when given).

Script mode (a stand-in for ``python -m vllm.entrypoints.openai.api_server``)::

    python tests/fakes/openai_server.py --model M --host 127.0.0.1 --port P [--not-ready-for N]
        [--never-ready] [--crash MESSAGE] [--script ok,ok,500] [--delay SECONDS]

Unknown vLLM flags are accepted and ignored. The script serves until it is terminated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLES = {"system", "user", "assistant", "developer", "tool"}


def echo_reply(messages: list[dict[str, Any]]) -> str:
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return f"echo: {users[-1] if users else ''}"


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        model: str = "fake-model",
        script: list[str] | None = None,
        default: str = "ok",
        reply: Callable[[list[dict[str, Any]]], str] = echo_reply,
        gate_parties: int = 0,
        gate_timeout: float = 10.0,
        not_ready_for: int = 0,
        never_ready: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        root: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.model = model
        self.root = root  # vLLM reports the --model path (the weights) as `root` of the served id
        self.script = list(script or [])
        self.default = default
        self.reply = reply
        self.gate = threading.Barrier(gate_parties, timeout=gate_timeout) if gate_parties > 1 else None
        self.gate_parties = gate_parties
        self.not_ready_for = not_ready_for
        self.never_ready = never_ready
        self.delay = delay
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # chat bodies, in arrival order
        self.answered: list[tuple[dict[str, Any], dict[str, int]]] = []  # each completion sent: its request's body and its usage
        self.authorization: list[str] = []  # Authorization headers of chat requests
        self.model_requests = 0
        self.errors: list[str] = []
        self.gate_broken = False
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.release.set()
        if self.gate is not None:
            self.gate.abort()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- behaviour --------------------------------------------------------------------------------
    def _action(self, index: int) -> str:
        return self.script[index] if index < len(self.script) else self.default

    def _validate(self, body: Any) -> tuple[int, str] | None:
        if not isinstance(body, dict):
            return 400, "body is not a JSON object"
        if body.get("model") != self.model:
            return 404, f"model {body.get('model')!r} does not exist"
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return 400, "messages must be a non-empty list"
        for m in msgs:
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                return 400, f"bad message {m!r}"
        temp = body.get("temperature")
        if temp is not None and (isinstance(temp, bool) or not isinstance(temp, (int, float))):
            return 400, f"temperature {temp!r} is not a number"
        n = body.get("n", 1)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return 400, f"n {n!r} is not a positive integer"
        mt = body.get("max_tokens")
        if mt is not None and (isinstance(mt, bool) or not isinstance(mt, int) or mt < 1):
            return 400, f"max_tokens {mt!r} is not a positive integer"
        return None

    def completion(self, body: dict[str, Any], finish_reason: str) -> dict[str, Any]:
        texts = [self.reply(body["messages"]) for _ in range(int(body.get("n", 1)))]  # ``n`` choices, as the API returns them
        prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
        completion_tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
        with self.lock:
            self.answered.append((body, usage))
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": finish_reason, "logprobs": None}
                for i, t in enumerate(texts)
            ],
            "usage": usage,
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
                return

            def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def _error(self, status: int, message: str) -> None:
                self._send(status, {"error": {"message": message, "type": "fake_error", "code": status}})

            def do_GET(self) -> None:  # stdlib naming
                if self.path.rstrip("/") != "/v1/models":
                    return self._error(404, f"no route {self.path}")
                with server.lock:
                    server.model_requests += 1
                    not_ready = server.never_ready or server.model_requests <= server.not_ready_for
                if not_ready:
                    return self._error(503, "model is loading")
                entry = {"id": server.model, "object": "model", "created": 0, "owned_by": "fake"}
                if server.root is not None:
                    entry["root"] = server.root
                self._send(200, {"object": "list", "data": [entry]})

            def do_POST(self) -> None:  # stdlib naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._error(404, f"no route {self.path}")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server.lock:
                    index = len(server.requests)
                    server.requests.append(body if isinstance(body, dict) else {})
                    server.authorization.append(self.headers.get("Authorization", ""))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body, index, server._action(index))
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, body: Any, index: int, action: str) -> None:
                problem = server._validate(body)
                if problem is not None:
                    with server.lock:
                        server.errors.append(problem[1])
                    return self._error(*problem)
                if server.gate is not None and index < server.gate_parties:
                    try:
                        server.gate.wait()
                    except threading.BrokenBarrierError:
                        with server.lock:
                            server.gate_broken = True
                if server.delay > 0:
                    server.release.wait(server.delay)  # close() cuts it short
                if action == "hang":
                    server.release.wait()
                    return self._error(503, "released without an answer")
                if action == "exit":
                    os._exit(3)
                if action == "malformed":
                    return self._send(200, None, raw=b'{"id": "chatcmpl-x", "choices": [ this is not json')
                if action.isdigit():
                    return self._error(int(action), f"scripted status {action}")
                self._send(200, server.completion(body, "length" if action == "length" else "stop"))

        return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="fake OpenAI-compatible server (vLLM api_server stand-in)")
    ap.add_argument("--model", default="fake-model")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--not-ready-for", type=int, default=0, help="answer 503 to the first N GET /v1/models")
    ap.add_argument("--never-ready", action="store_true")
    ap.add_argument("--crash", default=None, help="print this to stderr and exit 1 instead of serving")
    ap.add_argument(
        "--orphan", action="store_true", help="first start a child that outlives this process (as vLLM's engine core can), and log its pid"
    )
    ap.add_argument("--script", default="", help="comma-separated actions for the chat completions (see above)")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to hold every chat answer (a generator's time per answer)")
    args, unknown = ap.parse_known_args(argv)
    print(f"fake server: pid={os.getpid()} args={' '.join(argv if argv is not None else sys.argv[1:])} ignored={unknown}", flush=True)
    if args.orphan:
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL)
        print(f"fake engine: pid={child.pid}", flush=True)
    if args.crash:
        print(f"RuntimeError: {args.crash}", file=sys.stderr, flush=True)
        return 1
    srv = FakeOpenAIServer(
        model=args.served_model_name or args.model,
        not_ready_for=args.not_ready_for,
        never_ready=args.never_ready,
        host=args.host,
        port=args.port,
        script=[a for a in args.script.split(",") if a],
        delay=args.delay,
    )
    print(f"fake server: listening on {srv.base_url}", flush=True)
    try:
        srv._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
