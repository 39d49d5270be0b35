"""Start and stop the stand-in: a REST server and a gRPC server on loopback, one ``Database``.

``WeaviateWire()`` binds both on free ports of 127.0.0.1 (or the given ones) when entered and
returns once ``/v1/.well-known/ready`` answers 200 and the gRPC health check answers SERVING
(polled against a bounded deadline: no sleeps as synchronisation); leaving it stops both and
joins the serving thread. ``python -m weaviate_wire --http-port P --grpc-port G`` (from ``tests/``)
runs one in the foreground, for a manual ``python -m t2exp store=weaviate ...``.
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.request
from concurrent import futures
from typing import Any

import grpc
from weaviate.proto.v1 import health_weaviate_pb2, weaviate_pb2_grpc

from .grpc_service import WeaviateServicer, health_handler
from .rest import rest_server
from .state import Database


class WeaviateWire:
    def __init__(self, http_port: int = 0, grpc_port: int = 0, host: str = "127.0.0.1", startup_timeout: float = 30.0) -> None:
        self.host = host
        self.db = Database()
        self._want = (http_port, grpc_port)
        self.startup_timeout = startup_timeout
        self.http_port = 0
        self.grpc_port = 0
        self._rest: Any = None
        self._grpc: Any = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> WeaviateWire:
        self._rest = rest_server(self.db, self.host, self._want[0])
        self.http_port = int(self._rest.server_address[1])
        self._thread = threading.Thread(target=self._rest.serve_forever, name="weaviate-wire-rest", daemon=True)
        self._thread.start()
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="weaviate-wire-grpc"))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(WeaviateServicer(self.db), self._grpc)
        self._grpc.add_generic_rpc_handlers((health_handler(),))
        self.grpc_port = int(self._grpc.add_insecure_port(f"{self.host}:{self._want[1]}"))
        if self.grpc_port == 0:
            self.stop()
            raise OSError(f"weaviate stand-in: cannot bind gRPC on {self.host}:{self._want[1]}")
        self._grpc.start()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/v1/.well-known/ready", timeout=2) as res:
                    ok_rest = res.status == 200
                with grpc.insecure_channel(f"{self.host}:{self.grpc_port}") as channel:
                    grpc.channel_ready_future(channel).result(timeout=max(0.1, deadline - time.monotonic()))
                    check = channel.unary_unary(
                        "/grpc.health.v1.Health/Check",
                        request_serializer=health_weaviate_pb2.WeaviateHealthCheckRequest.SerializeToString,
                        response_deserializer=health_weaviate_pb2.WeaviateHealthCheckResponse.FromString,
                    )
                    serving = check(health_weaviate_pb2.WeaviateHealthCheckRequest(), timeout=2).status == 1
                if ok_rest and serving:
                    self.db.requests.clear()  # the tests see the client's requests only
                    return
            except (OSError, grpc.RpcError, grpc.FutureTimeoutError) as exc:
                last = exc
        self.stop()
        raise TimeoutError(f"weaviate stand-in not ready after {self.startup_timeout}s: {last}")

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(10)
            self._grpc = None
        if self._rest is not None:
            self._rest.shutdown()
            self._rest.server_close()
            self._rest = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> WeaviateWire:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for tests ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def store_kwargs(self) -> dict[str, Any]:
        """What ``WeaviateStore(**...)`` needs to reach this server."""
        return {"connection": "local", "host": self.host, "http_port": self.http_port, "grpc_port": self.grpc_port}

    def overrides(self) -> list[str]:
        """The same as ``python -m t2exp`` overrides."""
        return ["store=weaviate", f"store.host={self.host}", f"store.http_port={self.http_port}", f"store.grpc_port={self.grpc_port}"]


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the Weaviate stand-in (REST + gRPC on loopback) until interrupted.")
    parser.add_argument("--http-port", type=int, default=8080)
    parser.add_argument("--grpc-port", type=int, default=50051)
    args = parser.parse_args()
    with WeaviateWire(args.http_port, args.grpc_port) as wire:
        print(f"weaviate stand-in: REST {wire.url}, gRPC {wire.host}:{wire.grpc_port}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
