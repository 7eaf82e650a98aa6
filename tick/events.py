"""Structured events (SPEC §9): one line per processed job, and log lines.

An event carries `ts`, `level`, `event` (`job_<id>`), `job_id` (the id as a
number, to filter on), `kind`, `outcome`, `state`, `attempts` and
`duration_ms`, with `trace_id` and `span_id` while tracing is active (SPEC
§21), and never a payload or error text.
Lines of one flush are written with a single call, since a busy tick emits
tens of thousands a second.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol, TextIO

from tick.redaction import redacted
from tick.report import FireReport
from tick.text import clip
from tick.words import LEVEL as LEVELS
from tick.words import Label

# Metric label rules shared by every exporter (SPEC §9): an instrument keeps
# at most this many label sets, and no label value longer than this many
# characters; the rest are recorded under OVERFLOW.
LABEL_SET_LIMIT = 128
LABEL_VALUE_LIMIT = 100
OVERFLOW = "cardinality_overflow"
# A kind is producer-controlled: an event shows at most this much of it.
EVENT_KIND_LIMIT = 200
# A text-format value printed bare: printable ASCII but space, '"', '=' and '\'.
_PLAIN = re.compile(r'[!#-<>-\[\]-~]+')


def label_value(value: str) -> str:
    """`value`, or OVERFLOW when it is too long to be a label (SPEC §9)."""
    return value if len(value) <= LABEL_VALUE_LIMIT else OVERFLOW


def event_kind(kind: str) -> str:
    """A job's kind as events show it: cut to a bounded length."""
    return clip(kind, EVENT_KIND_LIMIT)


def text_value(value: Any) -> str:
    """A value for the `key=value` text format: bare when plain, otherwise
    JSON-quoted, so no field can hold a newline or forge another field."""
    text = value if isinstance(value, str) else str(value)
    if _PLAIN.fullmatch(text):
        return text
    return json.dumps(text)



class JobEvent(NamedTuple):
    """One processed job, as events and metrics see it."""

    job_id: int
    kind: str
    outcome: Label
    state: str
    attempts: int
    duration_s: float
    lag_s: float
    # SPEC §21: the job span's ids, hex, while tracing is active; else None.
    trace_id: str | None = None
    span_id: str | None = None


@functools.lru_cache(maxsize=1024)
def _json_text(value: str) -> str:
    return json.dumps(value)


def _ids_json(e: JobEvent) -> str:
    return f',"trace_id":"{e.trace_id}","span_id":"{e.span_id}"'


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


class EventSink(Protocol):
    """Where job events and log lines go."""

    def jobs(self, events: Iterable[JobEvent]) -> None: ...

    def log(self, level: str, event: str, **fields: Any) -> None: ...


class StreamEvents:
    """Events as JSON lines (or `key=value` text) on a stream, stderr by default."""

    def __init__(self, fmt: str = "json", stream: TextIO | None = None) -> None:
        self._json = fmt == "json"
        self._stream = stream

    def _write(self, text: str) -> None:
        stream = self._stream or sys.stderr
        stream.write(text)
        stream.flush()

    def _line(self, record: dict[str, Any]) -> str:
        if self._json:
            return json.dumps(record, separators=(",", ":"), default=str) + "\n"
        head = f"{record.pop('ts')} {record.pop('level'):7} {text_value(record.pop('event'))}"
        rest = " ".join(f"{text_value(k)}={text_value(v)}" for k, v in record.items())
        return f"{head} {rest}\n"

    def jobs(self, events: Iterable[JobEvent]) -> None:
        ts = _iso(time.time())
        if self._json:
            # A template, not json.dumps per event: every field but the kind
            # is a number or from a closed set of plain words; the kind's
            # JSON form is cached.
            lines = [
                f'{{"ts":"{ts}","level":"{LEVELS[e.outcome]}",'
                f'"event":"job_{e.job_id}","job_id":{e.job_id},'
                f'"kind":{_json_text(event_kind(e.kind))},'
                f'"outcome":"{e.outcome}","state":"{e.state}","attempts":{e.attempts},'
                f'"duration_ms":{round(e.duration_s * 1000, 3)}'
                # SPEC §21: hex ids, while tracing is active.
                f'{"" if e.trace_id is None else _ids_json(e)}}}\n'
                for e in events
            ]
            if lines:
                self._write("".join(lines))
            return
        lines = [
            self._line({
                "ts": ts,
                "level": LEVELS[e.outcome],
                "event": f"job_{e.job_id}",
                "job_id": e.job_id,
                "kind": event_kind(e.kind),
                "outcome": e.outcome,
                "state": e.state,
                "attempts": e.attempts,
                "duration_ms": round(e.duration_s * 1000, 3),
                **({} if e.trace_id is None else {"trace_id": e.trace_id, "span_id": e.span_id}),
            })
            for e in events
        ]
        if lines:
            self._write("".join(lines))

    def log(self, level: str, event: str, **fields: Any) -> None:
        # A log line's text (a crashed part's error and traceback, a library's
        # message) may quote a URL setting: its secrets are replaced (SPEC §3).
        clean = {k: redacted(v) if isinstance(v, str) else v for k, v in fields.items()}
        self._write(self._line({"ts": _iso(time.time()), "level": level, "event": event, **clean}))


class DetachedEvents(StreamEvents):
    """`StreamEvents` whose lines a thread of its own writes, for `awc loop`:
    no part ever waits on the stream. A stream nobody reads (a full pipe, a
    stalled log collector) blocked the tick runner inside a write: no job
    ran while `/healthz` and `/readyz` said 200, and a stop left the jobs it
    had claimed RUNNING. Past `WAITING_LINES` waiting, a batch of lines is
    dropped; how many is said once the stream takes lines again."""

    WAITING_LINES = 10_000

    def __init__(self, fmt: str = "json", stream: TextIO | None = None) -> None:
        import queue
        import threading

        super().__init__(fmt, stream)
        self._waiting: queue.Queue[str | None] = queue.Queue(self.WAITING_LINES)
        self._full = queue.Full
        self._dropped = 0  # written by the parts, read and reset by the writer
        self._writer = threading.Thread(target=self._drain, name="awc-events", daemon=True)
        self._writer.start()

    def _write(self, text: str) -> None:
        try:
            self._waiting.put_nowait(text)
        except self._full:
            self._dropped += 1

    def _drain(self) -> None:
        while (text := self._waiting.get()) is not None:
            dropped, self._dropped = self._dropped, 0
            if dropped:
                super()._write(self._line({"ts": _iso(time.time()), "level": "warning",
                                           "event": "events_dropped", "batches": dropped}))
            super()._write(text)

    def close(self, timeout: float) -> None:
        """Write what is waiting, for at most `timeout` seconds."""
        try:
            self._waiting.put(None, timeout=timeout)
        except self._full:
            return
        self._writer.join(timeout)


class NullEvents:
    """Discards everything (benchmarks of the engine alone, and tests)."""

    def jobs(self, events: Iterable[JobEvent]) -> None:
        pass

    def log(self, level: str, event: str, **fields: Any) -> None:
        pass


class _EventLog(logging.Handler):
    """Library and handler log records (psycopg's, warnings, a handler's
    `log.exception`) as awc events: one JSON or text line each, scrubbed of
    passwords. A record logged with an exception keeps a bounded `traceback`
    field (SPEC §22), one field, never raw lines on stderr."""

    def __init__(self, sink: EventSink, own: str | None = None) -> None:
        super().__init__(logging.WARNING)
        self._sink = sink
        self._own = own

    def emit(self, record: logging.LogRecord) -> None:
        from tick.db import scrub
        from tick.redaction import redacted

        if record.name == self._own:  # the sink's own logger: written already
            return
        # psycopg's "error ignored terminating <Pipeline (host=... user=...)>":
        # a cleanup's failure after the error awc reports itself (a lost
        # connection, a refused statement), told again with where it went.
        if record.name.startswith("psycopg") and str(record.msg).startswith("error ignored"):
            return
        try:
            level = "error" if record.levelno >= logging.ERROR else "warning"
            message = clip(scrub(record.getMessage()), 500)
            fields: dict[str, Any] = {"logger": record.name, "message": message}
            error = record.exc_info[1] if record.exc_info else None
            if error is not None:
                from tick.tracebacks import exception_traceback

                fields["traceback"] = redacted(exception_traceback(error))
            self._sink.log(level, "library_log", **fields)
        except Exception:  # a log line must never take the process down
            pass


def bridge_logging(fmt: str) -> None:
    """Send every library log record and Python warning through awc's event
    stream, so stderr carries only awc's own lines (SPEC §3)."""
    bridge_logging_to(StreamEvents("text" if fmt == "text" else "json"))


def bridge_logging_to(sink: EventSink, own: str | None = None) -> None:
    """`bridge_logging` into any sink; records of the logger named `own` (a
    sink that writes through a logger of its own, whose records propagate to
    the root) are left to it."""
    root = logging.getLogger()
    root.handlers = [_EventLog(sink, own)]
    root.setLevel(logging.WARNING)
    logging.raiseExceptions = False
    logging.captureWarnings(True)


def report_fires(sink: EventSink, done: FireReport) -> None:
    """One `schedule_fire` event per ledger row a maintenance pass recorded
    (SPEC §15): the schedule, the fire time, its status and its job."""
    for schedule, fire_at, status, job_id in done.fires:
        sink.log("info", "schedule_fire", schedule=schedule, fire_at=fire_at.isoformat(),
                 status=status, job_id=job_id)
    for schedule, why in done.parked:
        sink.log("error", "schedule_unusable", schedule=schedule, error=why)
    for schedule, why in done.unplanned:  # left due for a host that can plan it
        sink.log("error", "schedule_not_planned_here", schedule=schedule, error=why)
