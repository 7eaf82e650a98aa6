"""SPEC §5: backoff base, full jitter, per-slot xorshift32 (pure rules)."""

from __future__ import annotations

import pytest

from tick.engine.backoff import Jitter, base_delay, seed_for, xorshift32


@pytest.mark.parametrize(
    ("attempts_before", "base"),
    [(0, 5), (1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 300), (7, 300), (50, 300)],
)
def test_base_delay_doubles_from_5s_and_caps_at_300s(attempts_before: int, base: int) -> None:
    assert base_delay(attempts_before) == base


def test_xorshift32_known_sequence() -> None:
    # Marsaglia's (13, 17, 5) generator from seed 1.
    state, seen = 1, []
    for _ in range(3):
        state = xorshift32(state)
        seen.append(state)
    assert seen == [270369, 67634689, 2647435461]


def test_xorshift32_never_reaches_zero_from_a_nonzero_seed() -> None:
    state = seed_for("awc-worker-1")
    for _ in range(10_000):
        state = xorshift32(state)
        assert 0 < state <= 0xFFFFFFFF


@pytest.mark.parametrize("attempts_before", range(8))
def test_jittered_delay_lies_in_base_to_twice_base(attempts_before: int) -> None:
    jitter = Jitter("awc-worker-3")
    base = base_delay(attempts_before)
    delays = [jitter.delay(attempts_before) for _ in range(2000)]
    assert all(base <= d <= 2 * base for d in delays)
    # Full jitter spreads over the whole interval, not a corner of it.
    assert min(delays) < base * 1.1 and max(delays) > base * 1.9


def test_slots_draw_different_streams() -> None:
    one, two = Jitter("awc-worker-1"), Jitter("awc-worker-2")
    assert [one.delay(0) for _ in range(5)] != [two.delay(0) for _ in range(5)]


def test_same_worker_id_gives_the_same_stream() -> None:
    assert [Jitter("w-1").unit() for _ in range(3)] == [Jitter("w-1").unit() for _ in range(3)][:3]
    a, b = Jitter("w-1"), Jitter("w-1")
    assert [a.unit() for _ in range(5)] == [b.unit() for _ in range(5)]


@pytest.mark.parametrize(("attempt", "base"), [(0, 0.25), (1, 0.5), (2, 1.0), (5, 8.0), (6, 10.0),
                                               (30, 10.0), (1024, 10.0), (10**9, 10.0)])
def test_reconnect_delay_doubles_to_ten_seconds_plus_half_jitter(attempt: int, base: float) -> None:
    from tick.engine.backoff import reconnect_delay

    jitter = Jitter("awc-worker-reconnect")
    delays = [reconnect_delay(attempt, jitter) for _ in range(500)]
    assert all(base <= d <= 1.5 * base for d in delays)
    assert max(delays) > 1.4 * base


def test_processes_that_share_a_worker_id_draw_different_delays() -> None:
    # SPEC §5: every Lambda of one function has the same AWC_WORKER_ID; the
    # per-process nonce keeps their retries from firing on the same tick.
    import subprocess
    import sys

    from tests.support import ROOT

    code = ("from tick.engine.backoff import Jitter; "
            "print([round(Jitter('awc-worker-1').delay(3), 6) for _ in range(4)])")
    draws = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=30, check=True).stdout for _ in range(3)}
    assert len(draws) == 3


def test_a_given_nonce_makes_the_stream_reproducible() -> None:
    assert [Jitter("w-1", nonce=7).unit() for _ in range(3)] == [
        Jitter("w-1", nonce=7).unit() for _ in range(3)]
    assert Jitter("w-1", nonce=7).unit() != Jitter("w-1", nonce=8).unit()

