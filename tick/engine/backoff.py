"""Retry backoff (SPEC §5): exponential base, full jitter, per-slot xorshift32.

With `a` attempts made before this claim, the base delay is
`min(5 * 2**a, 300)` seconds; full jitter adds a uniform offset in
`[0, base]`, so the delay lies in `[base, 2 * base]`. Each slot draws from its
own xorshift32 generator seeded from its slot name and a per-process nonce,
so the retries of a pool, and of concurrent processes that share one
`AWC_WORKER_ID` (every Lambda of a function, cron on many hosts), do not all
fire on the same tick.
"""

from __future__ import annotations

import os
import zlib

BASE_SECS = 5
CAP_SECS = 300
_MASK = 0xFFFFFFFF


def base_delay(attempts_before: int) -> float:
    """The base delay after `attempts_before` earlier attempts."""
    if attempts_before >= 6:  # 5 * 2**6 = 320 > 300; avoids huge powers
        return float(CAP_SECS)
    return float(min(BASE_SECS * 2 ** max(attempts_before, 0), CAP_SECS))


def xorshift32(state: int) -> int:
    """One step of Marsaglia's xorshift32 (13, 17, 5). `state` must be non-zero."""
    state ^= (state << 13) & _MASK
    state ^= state >> 17
    state ^= (state << 5) & _MASK
    return state & _MASK


# Drawn once per process (SPEC §5): two processes with the same worker id
# start their streams at different states.
PROCESS_NONCE = int.from_bytes(os.urandom(4), "little")


def seed_for(worker_id: str, nonce: int = 0) -> int:
    """A non-zero 32-bit seed derived from a slot's name and a nonce."""
    return (zlib.crc32(worker_id.encode("utf-8", "backslashreplace")) ^ nonce) or 0x9E3779B9


class Jitter:
    """A slot's jitter source: a xorshift32 stream seeded by its slot name and
    this process's nonce (or the `nonce` given, for reproducible tests)."""

    __slots__ = ("_state",)

    def __init__(self, worker_id: str, nonce: int | None = None) -> None:
        self._state = seed_for(worker_id, PROCESS_NONCE if nonce is None else nonce)

    def unit(self) -> float:
        """The next draw, uniform in [0, 1]."""
        self._state = xorshift32(self._state)
        return self._state / _MASK

    def delay(self, attempts_before: int) -> float:
        """The retry delay in seconds, in `[base, 2 * base]`."""
        base = base_delay(attempts_before)
        return base + base * self.unit()


def reconnect_delay(attempt: int, jitter: Jitter, *, first: float = 0.25,
                    cap: float = 10.0) -> float:
    """How long to wait before reconnect `attempt` (0-based) to a lost
    database: `first` (0.25 s) doubling to `cap` (10 s), plus up to half
    again of jitter. The supervisor's restarts wait the same way, from
    their own first delay and cap."""
    # The exponent is bounded: 2.0 ** 1024 overflows a float, and a listener
    # the server ends at once counts its attempts for as long as it runs.
    base = float(min(first * 2.0 ** min(attempt, 64), cap))
    return base + base * jitter.unit() / 2
