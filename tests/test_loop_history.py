"""SPEC §16: every run of the engine has a row, the loop's busy stretches
too. A stretch's row is opened by the round trip of its first claim and its
deadline pushed back while the loop lives, so a loop killed mid-stretch
leaves a row that `awc ticks` shows as died, and a live one never does."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg

from tests.support import registry_with, run_awc, spawn, wait_for
from tick.db import connect
from tick.history import ticks
from tick.producer import enqueue


def loop_rows(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    return [r for r in ticks(conn, driver="loop", limit=100) if r["driver"] == "loop"]


def test_a_killed_loop_leaves_its_stretch_row_and_awc_ticks_shows_it_died(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job = enqueue(conn, "sleep", {"seconds": 60})
    proc = spawn({**awc_env, "AWC_WORKER_LEASE_SECS": "6"}, "loop")
    try:
        wait_for(lambda: conn.execute("SELECT 1 FROM test_ledger WHERE job_id = %s",
                                      (job,)).fetchone(), timeout=30, what="the job to start")
        # The newest open stretch: on a loaded machine a renewal of the 6 s
        # lease may come late, the job be rescued and claimed again, and a
        # second stretch open beside the first (both then die with the loop).
        # A stretch's row has a deadline (its lease) from its insert; an idle
        # pass's row, open while its maintenance runs, has none.
        row = wait_for(lambda: [r for r in loop_rows(conn) if r["claimed"] == 0
                                and r["finished_at"] is None
                                and r["deadline_at"] is not None], timeout=5,
                       what="the running stretch's row, with its lease")[0]
        assert not row["died"]
    finally:
        proc.kill()  # SIGKILL: nothing of the loop runs after this
        proc.communicate(timeout=30)

    def shown_died() -> list[dict[str, Any]]:
        done = run_awc(awc_env, "ticks", "--driver", "loop", "--json")
        assert done.returncode == 0, done.stderr
        return [r for r in json.loads(done.stdout) if r["id"] == row["id"] and r["died"]]

    (died,) = wait_for(shown_died, timeout=30, interval=0.5, what="the stretch shown died")
    assert died["finished_at"] is None
    text = run_awc(awc_env, "ticks", "--driver", "loop")
    assert "died" in text.stdout


def test_a_live_stretch_longer_than_its_lease_never_shows_died(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The row's deadline is a lease the running loop renews (once half is
    spent, never on the hot path); its report completes it at the end."""
    from tick.engine.api import Engine, RunSpec
    from tick.history import TickStart

    def long(ctx: Any, payload: Any) -> None:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            ctx.heartbeat()
            time.sleep(0.2)

    engine = Engine(lambda: connect(db_url), registry=registry_with(long=long))
    # A 3 s lease is renewed at 1.5 s intervals: the row keeps 1.5 s of slack
    # for a coordinator slowed by a loaded machine, and still turns over
    # twice during the 5 s job.
    spec = RunSpec(history=TickStart("loop", "w-live"), continuous=True, lease_secs=3,
                   concurrency=1, poll_interval_s=0.2)
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(spec, stop))
    runner.start()
    try:
        job = enqueue(conn, "long")
        wait_for(lambda: loop_rows(conn), timeout=10, what="the stretch's row")
        seen = []
        while conn.execute("SELECT state FROM awc.jobs WHERE id = %s",
                           (job,)).fetchone() == ("RUNNING",):
            (row,) = loop_rows(conn)
            seen.append(row)
            assert not row["died"], row
            time.sleep(0.25)
        assert seen and max(r["deadline_at"] for r in seen) > min(r["deadline_at"] for r in seen)
        (row,) = wait_for(lambda: [r for r in loop_rows(conn) if r["finished_at"]], timeout=10,
                          what="the stretch's row completed")
        assert (row["claimed"], row["completed"], row["died"]) == (1, 1, False)
    finally:
        stop.set()
        engine.wake()
        runner.join(30)
        engine.close()


def test_a_stretch_row_costs_the_loop_no_round_trip(conn: psycopg.Connection[Any]) -> None:
    """SPEC §16: opened in its first claim's round trip, completed in its
    last; the same exchanges as a loop that keeps no history."""
    from tests.exchanges import exchanges
    from tick.engine.api import Engine, RunSpec
    from tick.history import TickStart
    from tick.producer import enqueue_many

    engine = Engine(lambda: conn, registry=registry_with(noop=lambda ctx, payload: None))

    def stretch(history: bool) -> None:
        stop = threading.Event()
        spec = RunSpec(history=TickStart("loop", "w-rt") if history else None,
                       continuous=True, concurrency=1, poll_interval_s=30,
                       on_report=lambda report: stop.set())  # one stretch, then stop
        engine.run(spec, stop)

    counts = []
    for history in (False, True, False):
        enqueue_many(conn, [{"kind": "noop"}] * 3)
        counts.append(exchanges(conn, lambda h=history: stretch(h)))
    assert counts[0] == counts[2], counts  # deterministic
    assert counts[1] == counts[0], counts
    (row,) = loop_rows(conn)
    assert (row["claimed"], row["completed"], row["finished_at"] is not None) == (3, 3, True)


def test_a_busy_loop_writes_no_idle_rows_during_its_stretch(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A stretch counted as busy only once it ended: each maintenance pass
    during a long stretch wrote a row of its own (claimed 0, `drained`) as
    if the loop were idle, beside the stretch's."""
    job = enqueue(conn, "sleep", {"seconds": 4})
    proc = spawn({**awc_env, "AWC_MAINTENANCE_INTERVAL_SECS": "1"}, "loop")
    try:
        wait_for(lambda: conn.execute("SELECT state FROM awc.jobs WHERE id = %s",
                                      (job,)).fetchone() == ("COMPLETED",),
                 timeout=30, what="the job to complete")
        stretch = wait_for(lambda: [r for r in loop_rows(conn) if r["claimed"] == 1
                                    and r["finished_at"] is not None], timeout=10,
                           what="the stretch's row completed")[0]
        # Rows of passes while the stretch ran. The first pass, at the
        # loop's start, races the first claim: it may find no stretch open
        # and write its row after the stretch's row opened (CI on a clean
        # clone), or before; either way it is the first idle row, left out.
        # Every later pass during the 4 s stretch (one a second) is counted.
        rows = loop_rows(conn)
        first_pass = min((r["id"] for r in rows if r["claimed"] == 0), default=None)
        inside = [r for r in rows if r["id"] not in (stretch["id"], first_pass)
                  and r["started_at"] < stretch["finished_at"]]
        assert inside == [], inside
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
