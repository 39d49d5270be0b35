"""Test doubles that speak real wire protocols on 127.0.0.1 (no network, no sleeps).

``FakeHTTPServer`` is a stdlib ``ThreadingHTTPServer`` on a free port in a daemon thread. It
records every request, can be told to answer the next N requests with given error statuses
(``fail_next``) or every request with one (``fail_always``), and turns a request whose shape is
wrong (``ShapeError`` raised by a route) into a 400 whose reason is kept in ``rejections`` — so a
client that sends the wrong body fails loudly instead of being served. Provider fakes live in
``fakes.providers``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ShapeError(Exception):
    """The request is not what the real API accepts (answered with HTTP 400)."""


def expect(cond: object, message: str) -> None:
    if not cond:
        raise ShapeError(message)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or None when the body is empty / not JSON
    raw: bytes = b""


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[Recorded], Reply]


class FakeHTTPServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.rejections: list[str] = []
        self.fail_next: list[int] = []
        self.fail_always: int | None = None
        self.routes: dict[tuple[str, str], Route] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like the real services
            timeout = 10

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                reply = fake.handle(rec)
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # --- dispatch ------------------------------------------------------------------------------

    def handle(self, rec: Recorded) -> Reply:
        with self._lock:
            self.requests.append(rec)
            forced = self.fail_next.pop(0) if self.fail_next else self.fail_always
        if forced is not None:
            return self.error_reply(forced, f"injected failure {forced}")
        path = rec.path.split("?", 1)[0]
        route = self.routes.get((rec.method, path)) or self.match(rec.method, path)
        if route is None:
            with self._lock:
                self.rejections.append(f"no route for {rec.method} {path}")
            return self.error_reply(404, f"no route for {rec.method} {path}")
        try:
            return route(rec)
        except ShapeError as exc:
            with self._lock:
                self.rejections.append(str(exc))
            return self.error_reply(400, str(exc))

    def match(self, method: str, path: str) -> Route | None:
        """Routes with parameters in the path (override); exact ones go in ``self.routes``."""
        return None

    def error_reply(self, status: int, message: str) -> Reply:
        """The provider's error body (override); the default is OpenAI's."""
        return Reply(status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}})

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]
