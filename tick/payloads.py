"""A job's payload as the JSON text jsonb stores as sent (SPEC §4.3): what
`enqueue`, `enqueue_many` and its COPY path send."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tick.errors import EnqueueError
from tick.text import jsonb_refusal

_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
_ENCODE = _ENCODER.encode


def _built_once() -> Any:
    """CPython's C encoder with `_ENCODER`'s options, built once, or None
    where there is none or it does not encode as `_ENCODER` does.

    `JSONEncoder.encode` builds this same encoder on every call, which was
    half of a small payload's encoding time (1.24 against 0.59 µs); on a
    machine where the producer and PostgreSQL share cores, the producer's
    CPU per job is what keeps a COPY under the server's own rate (decision
    0006). Built once, it keeps no circular-reference check: a payload that
    holds itself recurses until the interpreter's limit, refused as such."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        built = make(None, _ENCODER.default, encoder.encode_basestring, None,
                     _ENCODER.key_separator, _ENCODER.item_separator, False, False, False)
        probe = {"a": [1, 2.5, None, True, "é\n\u2028"], "b": {}, "c": -0.0, "d": 2**70}
        if "".join(built(probe, 0)) != _ENCODE(probe):
            return None
    except Exception:  # another interpreter's signature: the encoder as documented
        return None
    return built


_BUILT = _built_once()


def _refusal(error: ValueError) -> str:
    """Why the encoder refused with a ValueError: its own words name one of
    two things, never the value."""
    if "ircular" in str(error):
        return "holds itself (a circular reference)"
    if "digits" in str(error):  # Python's limit on an integer's conversion to text
        return "holds an integer of too many digits"
    return "holds NaN or an infinite number"


def payload_json(payload: Mapping[str, Any] | None) -> str:
    """The payload as JSON text that jsonb stores as sent, or `EnqueueError`."""
    if type(payload) is not dict:  # a plain dict, the usual case, skips the ABC checks
        if payload is None or (isinstance(payload, Mapping) and not payload):
            return "{}"
        if not isinstance(payload, Mapping):
            raise EnqueueError("payload", "must be a JSON object")
        payload = dict(payload)
    elif not payload:
        return "{}"
    try:
        text = _ENCODE(payload) if _BUILT is None else "".join(_BUILT(payload, 0))
    except RecursionError:
        # Deeper than the interpreter recurses, or (the encoder built once
        # keeps no circular check) a payload that holds itself: the
        # documented encoder, which checks, tells them apart.
        if _BUILT is not None:
            try:
                _ENCODE(payload)
            except ValueError as error:
                raise EnqueueError("payload", _refusal(error)) from None
            except RecursionError:
                pass
        raise EnqueueError("payload", "is nested too deeply") from None
    except ValueError as error:
        raise EnqueueError("payload", _refusal(error)) from None
    except TypeError as error:
        raise EnqueueError("payload", f"is not JSON ({error})") from None
    refusal = jsonb_refusal(text)
    if refusal is not None:
        raise EnqueueError("payload", refusal)
    return text
