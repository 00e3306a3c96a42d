"""A real OTLP/HTTP trace receiver for the tests: a local HTTP server that takes ``POST /v1/traces``,
decodes each body with the official protobuf definitions (``opentelemetry-proto``) and keeps the
spans, so a test reads exactly what pincer's official exporter sent over the wire.

    with otlp_receiver() as receiver:
        ... OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint ...
        spans = receiver.wait_for(lambda spans: any(s.name == "execute_tool echo" for s in spans), what="...")
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["ReceivedSpan", "OtlpReceiver", "otlp_receiver", "WAIT_TIMEOUT_S"]

WAIT_TIMEOUT_S = 30.0
_POLL_S = 0.05
_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True, kw_only=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    service: str
    scope: str
    events: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    raw: str = ""  # the span's whole protobuf as text: what "appears in a span" is checked against


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _decode(body: bytes, encoding: str) -> list[ReceivedSpan]:
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=_KINDS.get(span.kind, str(span.kind)),
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        status_code=span.status.code,
                        status_message=span.status.message,
                        service=str(resource.get("service.name", "")),
                        scope=scope_spans.scope.name,
                        events=tuple(MessageToDict(e) for e in span.events),
                        raw=str(span) + str(resource_spans.resource),
                    )
                )
    return found


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.content_types: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                spans = _decode(body, (self.headers.get("content-encoding") or "").lower())
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                    receiver.content_types.append(self.headers.get("content-type") or "")
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1/traces"

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], *, what: str, timeout_s: float = WAIT_TIMEOUT_S
    ) -> list[ReceivedSpan]:
        """The spans received once ``done`` holds of them; fails naming ``what`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.snapshot()
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(f"no {what} within {timeout_s:g} s; received {len(spans)} spans: {names}")
            time.sleep(_POLL_S)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
