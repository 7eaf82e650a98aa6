"""The claim bookkeeping (tick/engine/claims.Claims), a pure rule, as tables:
how many slots a claim asks for, when claiming ends and why, and the stop
reason a run reports. No database, no threads."""

from __future__ import annotations

import pytest

from tick.engine.claims import MIN_CLAIM_SECS, Claims
from tick.engine.spec import RunSpec
from tick.queue import ClaimedRow, ClaimRequest

NOW = 1000.0


def claims(
    free: int,
    *,
    max_jobs: int | None = None,
    deadline: float | None = None,
    continuous: bool = False,
    claimed: int = 0,
) -> Claims:
    spec = RunSpec(max_jobs=max_jobs, deadline=deadline, continuous=continuous)
    state = Claims(spec, [f"s{n}" for n in range(free)], "{}")
    state.claimed = claimed
    return state


def rows(request: ClaimRequest, n: int) -> list[ClaimedRow]:
    return [
        ClaimedRow(i, "k", "{}", 1, 3, "t", slot, 300.0, 0.0, None)
        for i, slot in enumerate(request.slots[:n])
    ]


@pytest.mark.parametrize(
    ("state", "asked", "ended"),
    [
        # One slot asked for per free slot, the last ones first.
        (claims(4), ["s0", "s1", "s2", "s3"], None),
        (claims(1), ["s0"], None),
        # Nothing free: no claim, and claiming goes on.
        (claims(0), None, None),
        # max_jobs caps the claim at what is left of it ...
        (claims(4, max_jobs=10, claimed=8), ["s2", "s3"], None),
        (claims(4, max_jobs=3), ["s1", "s2", "s3"], None),
        # ... and ends claiming once reached.
        (claims(4, max_jobs=5, claimed=5), None, "max_jobs"),
        # A run shorter than a second claims while half of it is left ...
        (claims(4, deadline=NOW + MIN_CLAIM_SECS / 2), ["s0", "s1", "s2", "s3"], None),
        (claims(4, deadline=NOW - 1), None, "deadline"),
        # Enough time: a claim, its leases capped by what is left.
        (claims(2, deadline=NOW + 60), ["s0", "s1"], None),
    ],
    ids=[
        "all-free",
        "one-free",
        "none-free",
        "max-jobs-left",
        "max-jobs-cap",
        "max-jobs-reached",
        "deadline-short-run",
        "deadline-past",
        "deadline-far",
    ],
)
def test_what_a_claim_asks_for(state: Claims, asked: list[str] | None, ended: str | None) -> None:
    request = state.request(NOW)
    assert (None if request is None else request.slots) == asked
    assert state.ended == ended


def test_claiming_ends_a_second_before_the_deadline_or_at_half_a_short_run() -> None:
    # Too little time before the deadline: claiming ends.
    state = claims(4, deadline=NOW + 60)
    assert state.request(NOW) is not None
    state.free = ["s0"]
    assert state.request(NOW + 60 - MIN_CLAIM_SECS / 2) is None and state.ended == "deadline"
    short = claims(4, deadline=NOW + 0.6)  # `--max-secs 1`, 0.4 s spent starting
    assert short.request(NOW) is not None
    short.free = ["s0"]
    assert short.request(NOW + 0.2) is not None  # 0.4 left: more than half of 0.6
    assert short.request(NOW + 0.4) is None and short.ended == "deadline"


@pytest.mark.parametrize(
    ("deadline", "cap"),
    [(None, 300.0), (NOW + 60, 60.0), (NOW + 1000, 1000.0)],
)
def test_the_lease_cap_is_the_time_left(deadline: float | None, cap: float) -> None:
    request = claims(1, deadline=deadline).request(NOW)
    assert request is not None
    assert (request.lease_secs, request.cap_secs) == (300.0, cap)


@pytest.mark.parametrize(
    ("continuous", "got", "held_back", "ended", "free", "idle"),
    [
        # A full claim: the slots are taken, claiming goes on.
        (False, 3, False, None, 0, False),
        # A short claim ends a one-shot run as drained ...
        (False, 1, False, "drained", 2, False),
        (False, 0, False, "drained", 3, False),
        # ... and makes a continuous run wait for work instead.
        (True, 1, False, None, 2, True),
        # A limit held ready jobs back: claim again shortly, not drained.
        (False, 1, True, None, 2, True),
        # Held back yet the claim came back full: nothing was held back.
        (False, 3, True, None, 0, False),
    ],
    ids=["full", "short", "empty", "continuous-short", "held-back", "held-back-full"],
)
def test_what_a_claim_that_came_back_does(
    continuous: bool, got: int, held_back: bool, ended: str | None, free: int, idle: bool
) -> None:
    state = claims(3, continuous=continuous)
    request = state.request(NOW)
    assert request is not None
    state.took(request, rows(request, got), held_back=held_back)
    assert (state.ended, len(state.free), state.claimed) == (ended, free, got)
    assert (state.idle_until > 0) is idle  # waits until an instant, or not at all
    assert state.may_claim_later() is (continuous or (held_back and got < 3))


@pytest.mark.parametrize(
    ("ended", "deadline_cuts", "reason"),
    [
        (None, 0, "drained"),
        ("drained", 0, "drained"),
        ("max_jobs", 0, "max_jobs"),
        ("deadline", 0, "deadline"),
        ("stopped", 0, "stopped"),
        # A job cut at its deadline makes the run's reason `deadline` ...
        ("drained", 1, "deadline"),
        ("max_jobs", 2, "deadline"),
        # ... unless the run was stopped.
        ("stopped", 1, "stopped"),
    ],
)
def test_the_stop_reason(ended: str | None, deadline_cuts: int, reason: str) -> None:
    state = claims(1)
    state.ended = ended  # type: ignore[assignment]
    assert state.stop_reason(deadline_cuts) == reason


def test_a_released_slot_is_claimed_for_again() -> None:
    state = claims(2)
    request = state.request(NOW)
    assert request is not None
    state.took(request, rows(request, 2))
    assert state.request(NOW) is None
    state.release("s1")
    again = state.request(NOW)
    assert again is not None and again.slots == ["s1"]


def test_a_stopped_run_claims_nothing() -> None:
    state = claims(2, continuous=True)
    state.stop()
    assert state.request(NOW) is None
    assert not state.may_claim_later()
    assert state.stop_reason(0) == "stopped"
