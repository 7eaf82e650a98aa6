"""A job's payload as the JSON text jsonb stores as sent (SPEC §4.3): what
`enqueue`, `enqueue_many` and its COPY path send."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tick.errors import EnqueueError
from tick.text import jsonb_refusal

_ENCODE = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode


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
        text = _ENCODE(payload)
    except RecursionError:
        raise EnqueueError("payload", "is nested too deeply") from None
    except ValueError as error:  # the encoder's own words: only these two reach here
        why = ("holds itself (a circular reference)" if "ircular" in str(error)
               else "holds NaN or an infinite number")
        raise EnqueueError("payload", why) from None
    except TypeError as error:
        raise EnqueueError("payload", f"is not JSON ({error})") from None
    refusal = jsonb_refusal(text)
    if refusal is not None:
        raise EnqueueError("payload", refusal)
    return text
