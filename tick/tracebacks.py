"""Where a handler failed (SPEC §22): bounded tracebacks of a handler's own
frames, for a job's error history and for log records.

A traceback here is the handler's stack only: the frames awc's engine ran
it from are dropped, and so is everything below a call back into the
engine (`ctx.wait`, `ctx.checkpoint`: the handler's frame that made the
call says where it was). Each frame shows its file, line, function and
source line; never its locals, so a payload a handler holds never reaches
the text. The text is storable (no NUL, no lone surrogate: `printable`) and
at most `TRACEBACK_LIMIT` bytes, cut from the middle so that both the
handler's entry and the innermost frames survive.

Built only for failed runs, never for completed ones: the drain pays nothing.
"""

from __future__ import annotations

import linecache
import os
import stat
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType

from tick.redaction import redacted, redacted_head
from tick.text import printable

TRACEBACK_LIMIT = 8192  # bytes of UTF-8 (SPEC §22: at most 8 KB)
# A chain of causes longer than this is cut: the first ones say enough.
CHAIN_LIMIT = 8
# An exception's message as a traceback shows it, like `last_error` (SPEC §4.1).
MESSAGE_LIMIT = 500
# A source line longer than this (minified code) is cut.
SOURCE_LIMIT = 200
# A source file larger than this is not read for its line.
SOURCE_FILE_LIMIT = 4 << 20

_ENGINE = str(Path(__file__).resolve().parent / "engine") + os.sep

FrameList = list[traceback.FrameSummary]


def _in_engine(frame: traceback.FrameSummary) -> bool:
    return frame.filename.startswith(_ENGINE)


def _own(frames: FrameList, *, entered: bool) -> FrameList:
    """The handler's frames of `frames` (outermost first). `entered`: the
    list starts above the engine's call into the handler (a thread's whole
    stack), so everything to the end of the first run of engine frames goes.
    Then the handler's frames run to its first call back into the engine."""
    start = 0
    if entered:
        first = next((i for i, f in enumerate(frames) if _in_engine(f)), None)
        if first is not None:
            start = first
            while start < len(frames) and _in_engine(frames[start]):
                start += 1
    else:
        while start < len(frames) and _in_engine(frames[start]):
            start += 1  # the engine frame that caught the exception
    end = start
    while end < len(frames) and not _in_engine(frames[end]):
        end += 1
    return frames[start:end]


def _frame_lines(frames: FrameList) -> Iterator[str]:
    for f in frames:
        yield f'  File "{f.filename}", line {f.lineno}, in {f.name}\n'
        source = _source(f.filename, f.lineno).strip()
        if source:
            yield f"    {source[:SOURCE_LIMIT]}\n"


def _source(filename: str, lineno: int | None) -> str:
    """A frame's source line, read only from a regular file of bounded size
    (or what Python's line cache holds). The file may have been replaced
    since the handler was imported: by a FIFO, whose open blocks (the
    coordinator reads a stack at a deadline: the tick never returned, nor
    heeded SIGTERM), or by /dev/zero, read until memory ran out."""
    if not lineno:
        return ""
    held = linecache.cache.get(filename)
    if held is None or len(held) == 1:  # not read yet (or a loader's lazy entry)
        try:
            found = os.stat(filename)
        except (OSError, ValueError):
            return ""
        if not stat.S_ISREG(found.st_mode) or found.st_size > SOURCE_FILE_LIMIT:
            return ""
    try:
        return linecache.getline(filename, lineno)
    except Exception:  # undecodable, vanished meanwhile
        return ""


def _message(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # a hostile __str__, even one raising SystemExit (outcomes.py)
        text = "(the exception's message could not be read)"
    name = type(error).__name__[:100]
    text = redacted_head(text, MESSAGE_LIMIT)
    return f"{name}: {text}\n" if text else f"{name}\n"


def _chain(error: BaseException) -> list[tuple[BaseException, str]]:
    """`error` and its causes, oldest first, each with the words that link
    it to the next (as Python prints them); a cycle or a long chain is cut."""
    links: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen and len(links) < CHAIN_LIMIT:
        seen.add(id(current))
        links.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, (
                "\nThe above exception was the direct cause of the following exception:\n\n")
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, (
                "\nDuring handling of the above exception, another exception occurred:\n\n")
        else:
            current = None
    return links[::-1]


def exception_traceback(error: BaseException) -> str:
    """The bounded traceback of `error`, raised in a handler and caught by
    the engine or by the handler itself (a log record), with its causes."""
    parts: list[str] = []
    chain = _chain(error)
    for i, (exc, _) in enumerate(chain):
        frames = _own(_extract(exc.__traceback__), entered=False)
        parts.append("Traceback (most recent call last):\n")
        parts.extend(_frame_lines(frames))
        parts.append(_message(exc))
        if i + 1 < len(chain):
            parts.append(chain[i + 1][1])
    return bounded("".join(parts))


def _extract(tb: TracebackType | None) -> FrameList:
    try:  # lines read by _source, never by the summary itself
        return list(traceback.StackSummary.extract(traceback.walk_tb(tb), lookup_lines=False))
    except Exception:  # an unreadable source file must not lose the entry
        return []


def thread_stack(thread_id: int) -> str | None:
    """Where the handler running on thread `thread_id` is now (a job cut at
    its deadline, SPEC §22), or None if the thread is gone or not in a
    handler. Python cannot stop the thread, but it can look at its stack."""
    frame: FrameType | None = sys._current_frames().get(thread_id)
    if frame is None:
        return None
    try:
        walked = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)
        frames = _own(list(reversed(walked)), entered=True)  # outermost first
    except Exception:
        return None
    finally:
        del frame  # a frame kept alive would keep the handler's locals alive
    if not frames:
        return None
    return bounded("Stack at the deadline (most recent call last):\n"
                   + "".join(_frame_lines(frames)))


def bounded(text: str, limit: int = TRACEBACK_LIMIT) -> str:
    """`text` made storable and at most `limit` bytes of UTF-8, cut from the
    middle: the head (the handler's entry) and the tail (where it failed) stay.
    It holds no secret awc knows of nor a connection string's password
    (SPEC §3), whether in a message or in a source line: redacted whole
    before the cut (so the cut splits no secret) up to 64 K characters,
    past that once cut, and cut again should `***` have lengthened it."""
    text = printable(text)
    whole = len(text) <= REDACTED_WHOLE
    if whole:
        text = redacted(text)
    text = _cut(text, limit)
    return text if whole else _cut(redacted(text), limit)


REDACTED_WHOLE = 65_536  # characters a traceback is redacted whole up to


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = f"\n... ({len(data)} bytes, the middle cut) ...\n".encode()
    keep = limit - len(marker)
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - (keep - keep // 2):].decode("utf-8", "ignore")
    return head + marker.decode() + tail


def import_location(error: BaseException) -> str | None:
    """Where a handler module failed to import: `FILE, line N`, or None.

    A syntax error names its own place; any other error names the innermost
    module-level line being executed (the module that failed, or the line of
    it that called what raised), never a frame of the import machinery."""
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        return printable(f"{error.filename}, line {error.lineno}")
    place = None
    for f in _extract(error.__traceback__):
        if f.name == "<module>" and not f.filename.startswith("<frozen"):
            place = f"{f.filename}, line {f.lineno}"
    return None if place is None else printable(place)
