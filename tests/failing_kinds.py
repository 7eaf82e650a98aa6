"""Job kinds that fail in telling ways, for the error history and the logs
(SPEC §22). Loaded in `awc` processes with AWC_HANDLER_MODULES; the tests
look for these functions' names and lines in what awc recorded, so each
failure happens in a function of its own."""

from __future__ import annotations

import logging
import time
from typing import Any

from tick import JobContext, Retry, handler

log = logging.getLogger("tests.failing_kinds")


def parse_order(secret: str) -> None:
    """Fails with the payload's secret in a local, never in its message."""
    checksum = secret[::-1]  # a local holding payload data
    raise ValueError(f"order checksum has {len(checksum)} characters, not 40")


@handler("raises")
def raises(ctx: JobContext, payload: dict[str, Any]) -> None:
    secret = payload.get("secret", "")
    parse_order(secret)


def hang_in_io(secs: float) -> None:
    """Deaf to its context: only the deadline ends it."""
    time.sleep(secs)


@handler("hangs")
def hangs(ctx: JobContext, payload: dict[str, Any]) -> None:
    hang_in_io(float(payload.get("secs", 60)))


def recurse(depth: int) -> None:
    if depth == 0:
        raise RecursionError("the innermost frame gave up")
    recurse(depth - 1)


@handler("deep")
def deep(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A traceback far over 8 KB."""
    recurse(int(payload.get("depth", 400)))


def call_upstream() -> None:
    raise TimeoutError("upstream did not answer in 30 s")


@handler("retries_caught")
def retries_caught(ctx: JobContext, payload: dict[str, Any]) -> Retry:
    """Catches the failure and hands the exception to Retry."""
    try:
        call_upstream()
    except TimeoutError as error:
        return Retry(error)  # type: ignore[arg-type]
    return Retry("unreachable")


@handler("hostile")
def hostile(ctx: JobContext, payload: dict[str, Any]) -> None:
    """An exception message PostgreSQL text cannot hold as it is."""
    raise RuntimeError("bad\x00byte and a lone \udcff surrogate")


class Interrupting(Exception):
    """An exception whose message raises what is not an Exception."""

    def __str__(self) -> str:
        raise KeyboardInterrupt


@handler("interrupting")
def interrupting(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise Interrupting


def charge_card(secret: str) -> None:
    raise ConnectionError(f"the card service hung up after {len(secret)} bytes")


@handler("logs_exception")
def logs_exception(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Handles its own failure, logging it with the exception."""
    try:
        charge_card(payload.get("secret", ""))
    except ConnectionError:
        log.exception("charging failed; will try the other service")


@handler("logs_huge_exception")
def logs_huge_exception(ctx: JobContext, payload: dict[str, Any]) -> None:
    try:
        recurse(int(payload.get("depth", 400)))
    except RecursionError:
        log.exception("gave up")
