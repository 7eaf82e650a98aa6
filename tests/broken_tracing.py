"""A host's tracing that raises (tests/test_tracing.py): a tracer provider
whose span processor fails as the span named by AWC_TEST_BROKEN_SPAN starts
or ends (AWC_TEST_BROKEN_AT: `start` or `end`). Loaded as a handler module,
as a host's own setup module would be."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

NAME = os.environ.get("AWC_TEST_BROKEN_SPAN", "")
AT = os.environ.get("AWC_TEST_BROKEN_AT", "end")


class Broken(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if AT == "start" and span.name.startswith(NAME):
            raise RuntimeError("the processor broke as the span started")

    def on_end(self, span: Any) -> None:
        if AT == "end" and span.name.startswith(NAME):
            raise RuntimeError("the processor broke as the span ended")


provider = TracerProvider()
provider.add_span_processor(Broken())
trace.set_tracer_provider(provider)
