"""Text that is safe to print, log and store, whatever a producer or a
handler put in it (SPEC §3, §4.2, §9).

Python strings can hold what PostgreSQL text and UTF-8 streams cannot: NUL
and lone surrogates (common in badly decoded file names). Every message awc
builds from foreign text goes through `printable` first.
"""

from __future__ import annotations

import re
from typing import Any


def printable(text: str) -> str:
    """`text` with lone surrogates escaped (`\\udc80`) and NUL dropped."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "")


# What a terminal acts on instead of showing (SPEC §3, §9): C0 controls (ESC
# opens a sequence that can write the clipboard or move the cursor; CR, LF
# and TAB forge rows and columns), DEL, the C1 controls (8-bit CSI and OSC),
# the Unicode line separators, and the bidirectional marks, overrides and
# isolates that reorder the text after them.
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """`text` as a terminal may show it: every character a terminal would act
    on, and every lone surrogate, written as its escape (`\\x1b`, `\\u202e`),
    so that producer-controlled text (a kind, a queue, a schedule's name, an
    error) can neither send a sequence nor forge a row of a table."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    elif text.isprintable():
        return text
    return _TERMINAL_UNSAFE.sub(_escape, text)


# Outside the printable ASCII range: in JSON text only inside a string,
# where its \u escape means the same character.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")


def _json_escape(match: re.Match[str]) -> str:
    units = match.group().encode("utf-16-be")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def json_for_terminal(text: str) -> str:
    """JSON text (as PostgreSQL writes jsonb) in printable ASCII: every other
    character written as its `\\u` escape, so the same JSON value, and
    nothing a terminal would act on (PostgreSQL escapes only the C0
    controls: DEL, the C1 controls and bidi overrides pass)."""
    return _NOT_PRINTABLE_ASCII.sub(_json_escape, text)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} characters)"


# An escaped NUL in JSON text: an odd number of backslashes before u0000.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def jsonb_refusal(text: str) -> str | None:
    """Why jsonb would refuse this JSON text (made with `ensure_ascii=False`),
    or None: it holds neither NUL (`\\u0000`) nor lone surrogates."""
    if "\\u0000" in text and _JSON_NUL.search(text):
        return "contains a NUL character (\\u0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate (not valid Unicode)"
    return None


def text_refusal(value: Any, limit: int) -> str | None:
    """Why `value` cannot be stored as a name or key of at most `limit`
    characters (PostgreSQL text holds neither NUL nor lone surrogates), or
    None. The reason never quotes the value."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > limit:
        return f"is longer than {limit} characters"
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate (not valid Unicode)"
    return None


def indented_json(value: Any, compact_chars: int, **options: Any) -> str | None:
    """`value` as JSON indented for a person, or None when that text would
    be more than four times its compact form's `compact_chars` (and 64 KiB):
    indentation grows with the square of the depth, and 99 KB of nested
    arrays indented to 90 MB. `options` as json.dumps takes them. The text
    is built a piece at a time and given up at the bound, never whole."""
    import json

    limit = 4 * compact_chars + 65536
    pieces, size = [], 0
    try:
        for piece in json.JSONEncoder(indent=2, **options).iterencode(value):
            size += len(piece)
            if size > limit:
                return None
            pieces.append(piece)
    except RecursionError:
        return None
    return "".join(pieces)


def json_value_text(value: Any) -> tuple[str | None, str | None]:
    """`value` as JSON text that jsonb stores as it is, or why it cannot be:
    (text, None) or (None, problem). The problem never quotes the value."""
    import json

    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        return None, "is nested too deeply"
    except (TypeError, ValueError) as error:
        # json's messages name types ("Object of type set is not JSON
        # serializable", "Out of range float values..."), never values.
        if "Out of range float" in str(error):
            return None, "holds NaN or an infinite number"
        return None, f"is not JSON: {str(error)[:200]}"
    refusal = jsonb_refusal(text)
    return (None, refusal) if refusal is not None else (text, None)
