"""A job's trace context (SPEC §21): the W3C `traceparent` and `tracestate`
of the request that enqueued it, stored as a text map in
`awc.jobs.trace_context` (docs/decisions/0032).

Pure text rules, no OpenTelemetry import: a producer without the `otel`
extra may pass a traceparent (`awc enqueue --traceparent`), and the worker
reads what a plain-SQL producer wrote. What is not valid W3C is never an
error: at enqueue it is not stored, at run time it counts as no context.
The one function that asks OpenTelemetry (`current`) does so only when the
process imported its API already: a process that never did has no span.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# W3C Trace Context, level 1: version-traceid-parentid-flags, lowercase hex.
# A later version may append fields after a dash, in the header's own
# alphabet (printable ASCII, no space: never a control character, which a
# terminal or a log line would act on); version ff is invalid.
_TRACEPARENT = re.compile(
    r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?", re.ASCII)
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
# A tracestate list-member: key=value (W3C §3.3.1), the key simple or
# tenant@system, the value printable ASCII but ',' and '=', not ending in a space.
_MEMBER = re.compile(
    r"(?:[a-z0-9][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]", re.ASCII)
TRACESTATE_MEMBERS = 32
TRACESTATE_CHARS = 512  # what a propagator must pass on, at least (W3C §3.3.1.1)
STORED_CHARS = 2048  # a stored map longer than this is not read at all


def valid_traceparent(value: Any) -> bool:
    """True if `value` is a W3C traceparent a consumer may join."""
    if not isinstance(value, str) or len(value) > 256:
        return False
    found = _TRACEPARENT.fullmatch(value)
    if found is None:
        return False
    version, trace_id, span_id, _, rest = found.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return False
    return trace_id != _ZERO_TRACE and span_id != _ZERO_SPAN


def valid_tracestate(value: Any) -> bool:
    """True if `value` is a W3C tracestate header (empty members allowed)."""
    if not isinstance(value, str) or len(value) > TRACESTATE_CHARS:
        return False
    members = [m.strip(" \t") for m in value.split(",")]
    present = [m for m in members if m]
    return len(present) <= TRACESTATE_MEMBERS and all(_MEMBER.fullmatch(m) for m in present)


def carrier(traceparent: Any, tracestate: Any = None) -> dict[str, str] | None:
    """The text map to store for these headers, or None when `traceparent`
    is not valid. A tracestate that is not valid is dropped alone, as W3C
    asks of a receiver."""
    if not valid_traceparent(traceparent):
        return None
    found = {"traceparent": str(traceparent)}
    if tracestate and valid_tracestate(tracestate):
        found["tracestate"] = str(tracestate).strip(" \t")
    return found


def stored_text(traceparent: Any, tracestate: Any = None) -> str | None:
    """The column's value (JSON text) for these headers, or None."""
    found = carrier(traceparent, tracestate)
    return None if found is None else json.dumps(found, separators=(",", ":"))


def read_stored(text: str | None) -> dict[str, str] | None:
    """The text map a claimed job carries, or None when there is none or it
    is not one awc can join (anything a producer wrote: never an error)."""
    if not text or len(text) > STORED_CHARS:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return carrier(value.get("traceparent"), value.get("tracestate"))


def current() -> str | None:
    """The current span's context as the column's value, or None when the
    OpenTelemetry API is not loaded or no span context is current.

    Checked in `sys.modules` first: a process that never imported the API
    has no tracer provider and no span, and pays one dict lookup."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    try:
        context = api.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        state = context.trace_state.to_header() if context.trace_state else None
        return stored_text(
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}",
            state)
    except Exception:  # a broken tracing setup never stops an enqueue
        return None
