"""A producer with its own OpenTelemetry SDK (SPEC §21's tests): in a span
`checkout`, it enqueues the jobs named on its command line (KIND or
KIND:MAX_ATTEMPTS), commits, exports its spans over OTLP/HTTP (OTEL_*
variables) and prints one JSON line: the job ids and the span's ids.

    python -m tests.trace_producer noop boom:2 fail
"""

from __future__ import annotations

import json
import os
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.span import TraceState

from tick import enqueue
from tick.db import connect


def main(kinds: list[str]) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("shop")
    ids = []
    with connect(os.environ["DATABASE_URL"]) as conn, tracer.start_as_current_span(
            "checkout", context=trace.set_span_in_context(trace.NonRecordingSpan(
                trace.SpanContext(0x1234, 0x5678, is_remote=True,
                                  trace_state=TraceState([("shop", "cart-7")]))))) as span:
        for item in kinds:
            kind, _, attempts = item.partition(":")
            ids.append(enqueue(conn, kind, max_attempts=int(attempts or 5)))
        found = span.get_span_context()
    provider.shutdown()
    print(json.dumps({"ids": ids, "trace_id": f"{found.trace_id:032x}",
                      "span_id": f"{found.span_id:016x}"}))


if __name__ == "__main__":
    main(sys.argv[1:])
