"""SPEC §26: when the engine renews a lease and when it gives up, as tables
over `tick.engine.leases.Leases` (pure bookkeeping: the instants are given,
nothing is sent)."""

from __future__ import annotations

import time

import pytest

from tick.engine.backoff import Jitter
from tick.engine.context import JobContext
from tick.engine.leases import Leases
from tick.engine.slots import Run
from tick.engine.spec import RunSpec
from tick.queue import ClaimedRow

T0 = time.monotonic() + 1000.0  # a claim's instant, well clear of now


def run_of(job_id: int, lease: float, timeout: float | None) -> Run:
    row = ClaimedRow(job_id, "k", "{}", 1, 5, f"token-{job_id}", "w-1", lease, 0.0, None)
    deadline = T0 + (timeout if timeout is not None else lease)
    ctx = JobContext(job_id, "k", 1, 5, deadline, lambda c, s: None, row.token,
                     fixed=timeout is not None)
    return Run(row, ctx, None, Jitter("w-1"))


def tracked(timeout: float | None, lease: float = 4.0, spec: RunSpec | None = None,
            ) -> tuple[Leases, Run]:
    leases = Leases(spec or RunSpec(lease_secs=lease))
    run = run_of(1, lease, timeout)
    leases.track(run, T0, lease)
    return leases, run


@pytest.mark.parametrize(("at", "going", "renewed"), [
    (0.5, True, False),   # an eighth spent: not ripe, even with a round trip going
    (1.0, True, True),    # a quarter spent: rides a round trip that goes anyway
    (1.5, False, False),  # ripe, but nothing goes and nothing is due: no round trip for it
    (2.0, False, True),   # half spent: due, a round trip of its own if need be
    (3.5, False, True),
])
def test_a_lease_rides_a_round_trip_from_a_quarter_and_is_due_at_half(
    at: float, going: bool, renewed: bool
) -> None:
    leases, _ = tracked(timeout=60)
    picked = leases.pick(T0 + at, going)
    assert picked == ([(1, "token-1", 4.0)] if renewed else [])


def test_a_job_without_a_timeout_is_not_renewed_its_lease_is_its_deadline() -> None:
    leases, _ = tracked(timeout=None)
    assert len(leases) == 0
    assert leases.pick(T0 + 3.9, True) == []


def test_a_timeout_within_the_lease_needs_no_renewal() -> None:
    leases, _ = tracked(timeout=3, lease=4)
    assert len(leases) == 0


def test_a_renewal_starts_the_lease_again() -> None:
    leases, _ = tracked(timeout=60)
    asked = leases.pick(T0 + 2.0, False)
    assert leases.answered(T0 + 2.0, asked, {1: 4.0}, {}) == []
    assert leases.pick(T0 + 2.9, True) == []  # a quarter of the new lease not yet spent
    assert leases.next_due == pytest.approx(T0 + 4.0)


def test_a_renewal_the_fence_refuses_is_a_lost_run() -> None:
    leases, run = tracked(timeout=60)
    asked = leases.pick(T0 + 2.0, False)
    assert leases.answered(T0 + 2.0, asked, {}, {}) == [run]
    assert len(leases) == 0


@pytest.mark.parametrize(("failed_at", "looked_at", "given_up"), [
    (1.0, 1.5, False),  # failing, a quarter of the lease to go before half
    (1.0, 2.0, True),   # unrenewed at half spent while failing: the run cancels itself
    (2.0, 2.0, True),   # the due renewal failed: nothing was renewed by half
])
def test_a_lease_unrenewed_at_half_while_renewals_fail_gives_up_its_run(
    failed_at: float, looked_at: float, given_up: bool
) -> None:
    leases, run = tracked(timeout=60)
    leases.failed(T0 + failed_at, leases.pick(T0 + failed_at, True))
    assert leases.failing_since == T0 + failed_at
    assert leases.given_up(T0 + looked_at) == ([run] if given_up else [])
    assert leases.next_give_up() == (float("inf") if given_up else pytest.approx(T0 + 2.0))


def test_a_refused_statement_is_retried_and_a_later_success_clears_the_failure() -> None:
    leases, _ = tracked(timeout=60)
    asked = leases.pick(T0 + 1.0, True)
    assert leases.answered(T0 + 1.0, asked, {}, {1: "QueryCanceled: ..."}) == []
    assert leases.failing_since == T0 + 1.0
    again = leases.pick(T0 + 1.3, True)  # retried a moment later
    assert again == asked
    assert leases.answered(T0 + 1.3, again, {1: 4.0}, {}) == []
    assert leases.failing_since is None and leases.trouble(T0 + 1.3) is None


def test_a_ticks_deadline_caps_what_a_renewal_asks_for() -> None:
    spec = RunSpec(lease_secs=4, deadline=T0 + 3.0)
    leases, _ = tracked(timeout=60, spec=spec)
    assert leases.pick(T0 + 2.0, False) == [(1, "token-1", pytest.approx(1.0))]


def test_after_an_outage_every_lease_is_renewed_at_once() -> None:
    leases, _ = tracked(timeout=60)
    leases.renew_all()
    assert leases.pick(T0 + 0.1, False) == [(1, "token-1", 4.0)]


def test_the_loops_trouble_names_failing_renewals_until_none_is_left() -> None:
    leases, run = tracked(timeout=60)
    leases.failed(T0 + 1.0)
    why = leases.trouble(T0 + 4.0)
    assert why is not None and "renewals failing for 3 s" in why
    leases.forget(run.row.id)
    assert leases.trouble(T0 + 4.0) is None
