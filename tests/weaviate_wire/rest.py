"""The stand-in's REST front end: the ``/v1`` endpoints weaviate-client calls for t2exp.

Readiness and liveness, ``/v1/meta``, the OpenID discovery probe (404: no OIDC), and the schema
endpoints (list, create, get, update, delete a class). Errors are Weaviate's JSON shape,
``{"error": [{"message": ...}]}``: 422 for an invalid class, 404 for a missing one. Any other
path is answered 404 and recorded in ``Database.unmodelled``.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .state import VERSION, Database, NotFound, SchemaError

GRPC_MAX_MESSAGE_SIZE = 104858000  # what a default Weaviate announces


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects; every answer has a Content-Length
    server: _RestServer

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        return None  # quiet: the tests read Database.requests instead

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": [{"message": message}]})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise SchemaError(f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise SchemaError("request body must be a JSON object")
        return body

    def _route(self) -> None:
        db = self.server.db
        path = self.path.split("?", 1)[0].rstrip("/")
        with db.lock:
            db.requests.append(f"REST {self.command} {path}")
            if self.headers.get("Authorization"):
                db.authorization.append(str(self.headers["Authorization"]))
        parts = path.split("/")[1:]  # "", "v1", ... -> "v1", ...
        try:
            if parts[:1] != ["v1"]:
                raise LookupError
            rest = parts[1:]
            if rest in (["meta"],) and self.command == "GET":
                return self._send(
                    200,
                    {
                        "hostname": f"http://127.0.0.1:{self.server.server_port}",
                        "version": VERSION,
                        "modules": {},
                        "grpcMaxMessageSize": GRPC_MAX_MESSAGE_SIZE,
                    },
                )
            if rest in ([".well-known", "ready"], [".well-known", "live"]) and self.command in ("GET", "HEAD"):
                return self._send(200)
            if rest == [".well-known", "openid-configuration"] and self.command == "GET":
                return self._error(404, "OIDC is not configured")  # what an anonymous-access server says
            if rest[:1] == ["schema"]:
                return self._schema(db, rest[1:])
            raise LookupError
        except LookupError:
            with db.lock:
                db.unmodelled.append(f"REST {self.command} {path}")
            return self._error(404, f"{self.command} {path} is not modelled by the Weaviate stand-in")
        except NotFound as exc:
            return self._error(404, str(exc))
        except SchemaError as exc:
            return self._error(422, str(exc))

    def _schema(self, db: Database, rest: list[str]) -> None:
        with db.lock:
            if not rest and self.command == "GET":
                return self._send(200, {"classes": [c.schema for c in db.collections.values()]})
            if not rest and self.command == "POST":
                return self._send(200, db.create(self._body()))
            if len(rest) != 1:
                raise LookupError
            name = rest[0]
            if self.command == "GET":
                return self._send(200, db.get(name).schema)
            if self.command == "PUT":
                return self._send(200, db.update(name, self._body()))
            if self.command == "DELETE":
                db.delete(name)
                return self._send(200)
            raise LookupError

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _route


class _RestServer(ThreadingHTTPServer):
    daemon_threads = True
    db: Database


def rest_server(db: Database, host: str = "127.0.0.1", port: int = 0) -> _RestServer:
    """Bound (``port=0``: a free port) but not yet serving; ``serve_forever`` in a thread serves it."""
    server = _RestServer((host, port), _Handler)
    server.db = db
    return server
