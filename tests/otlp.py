"""A small OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests
(SPEC §21): it decodes each ExportTraceServiceRequest an SDK's exporter
posts to /v1/traces and keeps its spans, flattened, for a test to read.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONSUMER = 5  # opentelemetry.proto.trace.v1.Span.SPAN_KIND_CONSUMER
INTERNAL = 1
STATUS_ERROR = 2  # Status.STATUS_CODE_ERROR


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


@dataclass
class Span:
    """One received span, ids as lowercase hex ('' for no parent)."""

    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent: str
    attributes: dict[str, Any]
    status: int
    events: list[tuple[str, dict[str, Any]]]
    trace_state: str = ""
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


class Receiver:
    """Collects spans posted to http://127.0.0.1:<port>/v1/traces."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                    ExportTraceServiceResponse,
                )

                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def add(self, request: Any) -> None:
        found = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    found.append(Span(
                        service, s.name, s.kind, s.trace_id.hex(), s.span_id.hex(),
                        s.parent_span_id.hex(), _attributes(s.attributes), s.status.code,
                        [(e.name, _attributes(e.attributes)) for e in s.events], s.trace_state,
                        [(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                         for link in s.links]))
        with self._lock:
            self.spans += found

    def named(self, name: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def wait(self, name: str, count: int = 1, timeout: float = 30) -> list[Span]:
        """The spans called `name` once `count` of them arrived."""
        end = time.monotonic() + timeout
        while True:
            found = self.named(name)
            if len(found) >= count:
                return found
            if time.monotonic() > end:
                with self._lock:
                    seen = sorted({s.name for s in self.spans})
                raise AssertionError(f"{count} span(s) {name!r} not received in {timeout}s; "
                                     f"received {seen}")
            time.sleep(0.05)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def sdk_env(endpoint: str, service: str) -> dict[str, str]:
    """The OTEL_* variables of a process whose SDK exports spans here."""
    return {
        "OTEL_SERVICE_NAME": service,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{endpoint}/v1/traces",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_TRACES_SAMPLER": "always_on",
    }
