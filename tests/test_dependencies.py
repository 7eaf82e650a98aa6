"""SPEC §20: dependencies between jobs, in one process: a child waits for its
parents, a parent's failure cancels (or lets run) its children down the
graph, an operator retry revives them, and bad declarations insert nothing.
The races (concurrent ticks, a killed tick) are in test_dependency_races.py."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.support import job_row, registry_with
from tick import Complete, EnqueueError, Fail, JobContext, tick
from tick.admin import retry
from tick.producer import enqueue, enqueue_many

pytestmark = pytest.mark.timeout(120)


def run_all(conn: psycopg.Connection[Any], reg: Any, rounds: int = 100) -> None:
    """Tick until nothing is left to claim (each tick drains what is ready)."""
    for _ in range(rounds):
        report = tick(conn, registry=reg, max_secs=30, max_jobs=1000, concurrency=4)
        if report.claimed == 0:
            return
    raise AssertionError("the queue did not drain")


def states(conn: psycopg.Connection[Any], ids: list[int]) -> list[str]:
    rows = dict(conn.execute("SELECT id, state FROM awc.jobs WHERE id = ANY(%s)",
                             (ids,)).fetchall())
    return [rows[i] for i in ids]


def count_jobs(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
    assert row is not None
    return int(row[0])


def ok(ctx: JobContext, payload: Any) -> Complete:
    return Complete({"job": ctx.job_id})


def test_a_child_runs_after_every_parent_and_reads_their_results(
        conn: psycopg.Connection[Any]) -> None:
    seen: list[Any] = []

    def child(ctx: JobContext, payload: Any) -> Complete:
        seen.extend(ctx.parents())
        return Complete({"parents": len(seen)})

    a, b = enqueue(conn, "parent"), enqueue(conn, "parent")
    c = enqueue(conn, "child", after=[a, b, a])  # an id named twice counts once
    assert job_row(conn, c)["waiting"] == 2
    # Only the child's kind: the child is never claimed while it waits.
    assert tick(conn, registry=registry_with(child=child), max_secs=10,
                kinds=["child"]).claimed == 0
    run_all(conn, registry_with(parent=ok, child=child))
    assert states(conn, [a, b, c]) == ["COMPLETED"] * 3
    assert [(p.id, p.kind, p.state, p.result) for p in seen] == [
        (a, "parent", "COMPLETED", {"job": a}), (b, "parent", "COMPLETED", {"job": b})]
    row = conn.execute(
        "SELECT bool_and(p.finished_at <= c.started_at) FROM awc.jobs AS c, awc.jobs AS p "
        "WHERE c.id = %s AND p.id = ANY(%s)", (c, [a, b])).fetchone()
    assert row == (True,)


def test_a_chain_of_30_runs_in_order(conn: psycopg.Connection[Any]) -> None:
    order: list[int] = []
    lock = threading.Lock()

    def step(ctx: JobContext, payload: Any) -> Complete:
        with lock:
            order.append(ctx.job_id)
        return Complete(None)

    jobs: list[dict[str, Any]] = [{"kind": "step"}]
    jobs += [{"kind": "step", "after": [f"#{n}"]} for n in range(29)]
    ids = enqueue_many(conn, jobs)
    run_all(conn, registry_with(step=step))
    assert order == ids


def test_a_failed_parent_cancels_down_the_graph_and_run_children_still_run(
        conn: psycopg.Connection[Any]) -> None:
    ids = enqueue_many(conn, [
        {"kind": "fails"},                                        # 0
        {"kind": "ok"},                                           # 1
        {"kind": "ok", "after": ["#0", "#1"]},                    # 2: cancelled
        {"kind": "ok", "after": ["#2"]},                          # 3: cancelled below it
        {"kind": "ok", "after": ["#0", "#1"], "on_parent_failure": "run"},  # 4: runs
        {"kind": "ok", "after": ["#3"], "on_parent_failure": "run"},        # 5: runs
    ])
    run_all(conn, registry_with(fails=lambda ctx, p: Fail("no"), ok=ok))
    assert states(conn, ids) == ["FAILED", "COMPLETED", "CANCELLED", "CANCELLED",
                                 "COMPLETED", "COMPLETED"]
    assert job_row(conn, ids[2])["last_error"] == f"ParentFailed: parent job {ids[0]} ended FAILED"
    assert job_row(conn, ids[3])["last_error"] == (
        f"ParentFailed: parent job {ids[2]} ended CANCELLED")


def test_an_operator_retry_of_the_failed_parent_revives_what_it_cancelled(
        conn: psycopg.Connection[Any]) -> None:
    ids = enqueue_many(conn, [{"kind": "flaky"}, {"kind": "ok", "after": ["#0"]},
                              {"kind": "ok", "after": ["#1"]}])
    healed = threading.Event()

    def flaky(ctx: JobContext, payload: Any) -> Complete | Fail:
        return Complete(None) if healed.is_set() else Fail("not yet")

    reg = registry_with(flaky=flaky, ok=ok)
    run_all(conn, reg)
    assert states(conn, ids) == ["FAILED", "CANCELLED", "CANCELLED"]
    healed.set()
    retry(conn, ids[0])
    assert states(conn, ids) == ["PENDING"] * 3
    assert [job_row(conn, i)["waiting"] for i in ids] == [0, 1, 1]
    run_all(conn, reg)
    assert states(conn, ids) == ["COMPLETED"] * 3


def test_a_parent_final_at_enqueue_counts_at_once(conn: psycopg.Connection[Any]) -> None:
    done, failed = enqueue(conn, "ok"), enqueue(conn, "fails")
    run_all(conn, registry_with(ok=ok, fails=lambda ctx, p: Fail("no")))
    after_done = enqueue(conn, "ok", after=[done])
    assert job_row(conn, after_done)["waiting"] == 0
    cancelled = enqueue_many(conn, [{"kind": "ok", "after": [done, failed]},
                                    {"kind": "ok", "after": ["#0"]}])
    runs = enqueue(conn, "ok", after=[failed], on_parent_failure="run")
    assert states(conn, cancelled) == ["CANCELLED", "CANCELLED"]
    run_all(conn, registry_with(ok=ok))
    assert states(conn, [after_done, runs]) == ["COMPLETED", "COMPLETED"]


def test_a_child_cancelled_while_waiting_stays_cancelled(conn: psycopg.Connection[Any]) -> None:
    parent = enqueue(conn, "ok")
    child = enqueue(conn, "ok", after=[parent])
    conn.execute("UPDATE awc.jobs SET state = 'CANCELLED' WHERE id = %s", (child,))
    run_all(conn, registry_with(ok=ok))
    assert states(conn, [parent, child]) == ["COMPLETED", "CANCELLED"]


@pytest.mark.parametrize(("jobs", "field", "reason"), [
    ([{"kind": "k", "after": [10**9]}], "job 0: after", "names job 1000000000, which does not"),
    ([{"kind": "k", "after": ["#0"]}], "job 0: after", '"#0" is not an earlier job'),
    ([{"kind": "k"}, {"kind": "k", "after": ["#2"]}], "job 1: after", '"#2" is not an earlier'),
    ([{"kind": "k", "after": ["#x"]}], "job 0: after", 'is not "#N"'),
    ([{"kind": "k", "after": ["#\u0661"]}], "job 0: after", 'is not "#N"'),  # not ASCII
    # more digits than int() reads: refused as any other N too large
    ([{"kind": "k"}, {"kind": "k", "after": ["#" + "9" * 5000]}], "job 1: after",
     '"#N" is not an earlier job of this call (this is job 1)'),
    ([{"kind": "k", "after": "#0"}], "job 0: after", "must be a list of job ids"),
    ([{"kind": "k", "after": [1.5]}], "job 0: after", "must list job ids"),
    ([{"kind": "k", "after": [True]}], "job 0: after", "must list job ids"),
    ([{"kind": "k", "after": [-1]}], "job 0: after", "out of range"),
    ([{"kind": "k", "after": list(range(1, 10_002))}], "job 0: after", "more than 10000"),
    ([{"kind": "k", "on_parent_failure": "ignore"}], "job 0: on_parent_failure", "'cancel' or"),
    ([{"kind": "k", "after": [1], "dedupe_key": "d"}], "job 0: after", "dedupe_key"),
    ([{"kind": "k"}, {"kind": "", "after": ["#0"]}], "job 1: kind", "must not be empty"),
])
def test_bad_declarations_are_refused_by_field_with_nothing_inserted(
        conn: psycopg.Connection[Any], jobs: list[dict[str, Any]], field: str,
        reason: str) -> None:
    if any(1 in job.get("after", []) for job in jobs if isinstance(job.get("after"), list)):
        enqueue(conn, "existing")  # job 1 exists: the refusal is for another reason
    before = count_jobs(conn)
    with pytest.raises(EnqueueError) as caught:
        enqueue_many(conn, jobs)
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert count_jobs(conn) == before


@pytest.mark.parametrize("item", [5, None, "kind", ["kind"]])
def test_a_job_that_is_no_mapping_is_refused_by_its_index(
        conn: psycopg.Connection[Any], item: Any) -> None:
    before = count_jobs(conn)
    for jobs in ([{"kind": "k"}, item], [{"kind": "k", "after": []}, item]):
        with pytest.raises(TypeError, match=r"enqueue_many: job 1 is a .*, not a mapping"):
            enqueue_many(conn, jobs)
    assert count_jobs(conn) == before


def test_enqueue_refuses_a_reference_it_cannot_have(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(EnqueueError) as caught:
        enqueue(conn, "k", after=["#0"])  # type: ignore[list-item]
    assert caught.value.field == "after" and count_jobs(conn) == 0
    with pytest.raises(EnqueueError) as caught:
        enqueue(conn, "k", on_parent_failure="later")
    assert caught.value.field == "on_parent_failure" and count_jobs(conn) == 0


def test_pruning_keeps_a_parent_a_live_child_still_needs(conn: psycopg.Connection[Any]) -> None:
    from tick.maintenance import prune

    needed, spare, lone = enqueue(conn, "ok"), enqueue(conn, "ok"), enqueue(conn, "ok")
    child = enqueue(conn, "late", after=[needed, spare])
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - interval '2 days'"
                 " WHERE id = ANY(%s)", ([needed, spare, lone],))
    assert prune(conn, 3600, force=True) == 1  # the lone one only
    assert states(conn, [needed, spare, child]) == ["COMPLETED", "COMPLETED", "PENDING"]
    run_all(conn, registry_with(late=ok))
    assert prune(conn, 3600, force=True) == 2  # once the child is final, both go


def test_a_parent_deleted_while_its_child_was_final_is_listed_as_deleted(
        conn: psycopg.Connection[Any]) -> None:
    """A child cancelled by one parent's failure is final, so its completed
    parent may go (retention, or a discard); a retry of the failed parent
    revives the child, whose ctx.parents() left the deleted parent out: a
    callback read a part of its batch as the whole."""
    from tick.admin import discard

    seen: list[Any] = []

    def child(ctx: JobContext, payload: Any) -> Complete:
        seen.extend(ctx.parents())
        return Complete()

    done, failing = enqueue(conn, "parent"), enqueue(conn, "parent")
    c = enqueue(conn, "child", after=[done, failing])
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (done,))
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() WHERE id = %s",
                 (failing,))
    assert states(conn, [c]) == ["CANCELLED"]
    discard(conn, done)  # allowed: its only child is final
    retry(conn, failing)
    run_all(conn, registry_with(parent=ok, child=child))
    assert states(conn, [failing, c]) == ["COMPLETED", "COMPLETED"]
    assert [(p.id, p.kind, p.state, p.result) for p in seen] == [
        (done, None, "DELETED", None), (failing, "parent", "COMPLETED", {"job": failing})]


def test_discard_keeps_a_parent_a_live_child_still_needs(conn: psycopg.Connection[Any]) -> None:
    # SPEC §22: discard never deletes a parent a waiting child needs (its
    # ctx.parents() lost the parent's result, and its edge dangled); by id
    # it says why, in bulk the others go.
    from tick.admin import discard
    from tick.bulk import change
    from tick.errors import JobStateError

    needed, failed, lone = enqueue(conn, "ok"), enqueue(conn, "ok"), enqueue(conn, "ok")
    child = enqueue(conn, "late", after=[needed, failed], on_parent_failure="run")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (needed,))
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() WHERE id = ANY(%s)",
                 ([failed, lone],))
    with pytest.raises(JobStateError, match="still needs"):
        discard(conn, needed)
    assert change(conn, "discard", [needed, failed, lone]) == 1  # the lone one only
    assert states(conn, [needed, failed, child]) == ["COMPLETED", "FAILED", "PENDING"]
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (lone,)).fetchone() == (0,)
    run_all(conn, registry_with(late=ok))
    assert change(conn, "discard", [needed, failed]) == 2  # once the child is final


def test_discard_waits_for_a_producer_naming_the_parent_and_keeps_it(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    """SPEC §20, §22: `awc jobs discard P` while a producer's transaction
    names P as a parent: the discard waited for the producer's lock, then
    checked for children with a snapshot from before the wait, and deleted
    the parent the new child needs."""
    from tests.support import seen_waiting_on_a_lock
    from tick.admin import discard
    from tick.db import connect
    from tick.errors import JobStateError

    parent, slow = enqueue(conn, "ok"), enqueue(conn, "ok")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (parent,))
    refused: list[BaseException] = []
    with connect(db_url) as producer, connect(db_url) as operator:
        pid = operator.info.backend_pid

        def discard_now() -> None:
            try:
                discard(operator, parent)
            except JobStateError as error:
                refused.append(error)

        with producer.transaction():
            child = enqueue(producer, "late", after=[parent, slow])
            worker = threading.Thread(target=discard_now)
            worker.start()
            assert seen_waiting_on_a_lock(conn, pid), "the discard never waited for the producer"
        worker.join(20)
    assert len(refused) == 1 and "still needs" in str(refused[0])
    assert states(conn, [parent, child]) == ["COMPLETED", "PENDING"]


def test_show_says_what_holds_a_job_whose_parent_was_deleted_by_hand(
    conn: psycopg.Connection[Any],
) -> None:
    # A parent deleted by hand leaves the child's count at 1: the claim never
    # takes it, and `awc jobs show` said it waited for 0 of 1 parents.
    from tick.admin import cancel, retry, show_job

    parent = enqueue(conn, "ok")
    child = enqueue(conn, "late", after=[parent])
    conn.execute("DELETE FROM awc.jobs WHERE id = %s", (parent,))
    family = show_job(conn, child)["dependencies"]
    assert (family["waiting_for"], family["counted_waiting"], family["missing_parents"]) == (
        0, 1, 1)
    cancel(conn, child)
    retry(conn, child)  # counts its parents again: none is left to wait for
    assert "counted_waiting" not in show_job(conn, child)["dependencies"]
    run_all(conn, registry_with(late=ok))
    assert states(conn, [child]) == ["COMPLETED"]


def test_wait_wakes_on_the_final_notification(conn: psycopg.Connection[Any],
                                              db_url: str) -> None:
    from tick.db import connect
    from tick.waiting import JobOutcome, wait

    job = enqueue(conn, "ok")
    done = threading.Event()

    def finish() -> None:
        done.wait(10)
        with connect(db_url) as other:
            other.execute("UPDATE awc.jobs SET state = 'COMPLETED', result = '{\"n\": 1}' "
                          "WHERE id = %s", (job,))

    import time

    worker = threading.Thread(target=finish)
    worker.start()
    start = time.monotonic()
    done.set()
    # The poll fallback is an hour: only the notification can answer in time.
    outcome = wait(conn, job, 10, poll_secs=3600)
    worker.join(10)
    assert outcome == JobOutcome("COMPLETED", {"n": 1}, None)
    assert time.monotonic() - start < 5


def test_wait_polls_when_no_notification_comes(conn: psycopg.Connection[Any],
                                               db_url: str) -> None:
    from tick.db import connect
    from tick.waiting import wait

    job = enqueue(conn, "ok")
    # An update the trigger does not announce (as if the notification were
    # lost): the job is final, only the poll can see it.
    conn.execute("ALTER TABLE awc.jobs DISABLE TRIGGER jobs_notify_final")
    timer = threading.Timer(0.3, lambda: connect(db_url).execute(
        "UPDATE awc.jobs SET state = 'FAILED', last_error = 'Fail: no' WHERE id = %s", (job,)))
    timer.start()
    outcome = wait(conn, job, 10, poll_secs=0.5)
    timer.join()
    assert (outcome.state, outcome.last_error) == ("FAILED", "Fail: no")
    with pytest.raises(TimeoutError):
        wait(conn, enqueue(conn, "never"), 0.2, poll_secs=0.05)


def test_a_nan_wait_is_refused_and_an_infinite_one_has_no_deadline(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    """SPEC §20: a NaN deadline never comes, and the wait polled without a
    pause (no comparison with NaN is true): refused, in the library and on
    the command line, where click's FloatRange let it through."""
    import math

    from tests.support import run_awc
    from tick.waiting import wait

    job = enqueue(conn, "ok")
    with pytest.raises(ValueError, match="timeout_secs"):
        wait(conn, job, math.nan)
    with pytest.raises(ValueError, match="poll_secs"):
        wait(conn, job, 1, poll_secs=math.nan)
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', result = '{}' WHERE id = %s", (job,))
    assert wait(conn, job, math.inf).state == "COMPLETED"
    for value in ("nan", "inf", "-inf", "1e400", "-1", "many"):
        done = run_awc(awc_env, "wait", str(job), "--timeout", value)
        assert done.returncode == 2 and "--timeout" in done.stderr, (value, done.stderr)
        assert "Traceback" not in done.stderr and value not in done.stderr.split(":")[-1]


def test_awc_wait_and_enqueue_after_from_the_command_line(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    from tests.support import run_awc

    parent = enqueue(conn, "ok")
    made = run_awc(awc_env, "enqueue", "ok", "--after", str(parent),
                   "--on-parent-failure", "run")
    assert made.returncode == 0, made.stderr
    child = int(made.stdout)
    shown = run_awc(awc_env, "jobs", "show", str(child))
    assert '"waiting_for": 1' in shown.stdout and '"parents": 1' in shown.stdout
    missing = run_awc(awc_env, "enqueue", "ok", "--after", "999999")
    assert missing.returncode == 2 and "--after" in missing.stderr
    assert "Traceback" not in missing.stderr
    late = run_awc(awc_env, "wait", str(child), "--timeout", "0.2")
    assert late.returncode == 1 and late.stderr.startswith("awc: job")
    run_all(conn, registry_with(ok=ok))
    done = run_awc(awc_env, "wait", str(child), "--timeout", "5")
    assert (done.returncode, done.stdout.strip()) == (0, f'{{"job": {child}}}')
    # A dead letter (a completed job is final: it sits in a finished part).
    dead = enqueue(conn, "ok")
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() WHERE id = %s",
                 (dead,))
    failed = run_awc(awc_env, "wait", str(dead))
    assert (failed.returncode, failed.stderr.strip()) == (1, f"awc: job {dead} ended FAILED")


def test_plain_sql_declares_parents_as_enqueue_does(conn: psycopg.Connection[Any]) -> None:
    parent = enqueue(conn, "ok")
    with conn.transaction():
        row = conn.execute("INSERT INTO awc.jobs (kind) VALUES ('ok') RETURNING id").fetchone()
        assert row is not None
        child = int(row[0])
        waits = conn.execute("SELECT awc.declare_parents(%s, ARRAY[%s, %s]::bigint[])",
                             (child, parent, parent)).fetchone()
    assert waits == (1,)
    assert tick(conn, registry=registry_with(ok=ok), max_secs=10,
                max_jobs=1).claimed == 1  # the parent only
    run_all(conn, registry_with(ok=ok))
    assert states(conn, [parent, child]) == ["COMPLETED", "COMPLETED"]
    before = count_jobs(conn)
    with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
        conn.execute("INSERT INTO awc.jobs (kind) VALUES ('ok')")
        conn.execute("SELECT awc.declare_parents(lastval(), ARRAY[999999]::bigint[])")
    with pytest.raises(psycopg.errors.InvalidParameterValue), conn.transaction():
        conn.execute("INSERT INTO awc.jobs (kind) VALUES ('ok')")
        conn.execute("SELECT awc.declare_parents(lastval(), ARRAY[%s]::bigint[], 'later')",
                     (parent,))
    assert count_jobs(conn) == before


@pytest.mark.parametrize(("payload", "wanted", "hit"), [
    ("7", "7", True), ("5,7,9", "7", True), ("5,77,9", "7", False),
    ("", "7", True), ("17", "7", False)])
def test_a_final_notice_names_one_job_a_statement_s_jobs_or_asks_all_to_look(
        payload: str, wanted: str, hit: bool) -> None:
    from tick.waiting import heard

    assert heard(payload, wanted) is hit


def test_awc_wait_goes_on_through_a_lost_connection(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    """A failover or a pooler's restart mid-wait ended `awc wait` with a
    database error, the job's outcome a moment away: it connects again and
    waits on, to its timeout."""
    import subprocess

    from tests.support import ROOT, awc_command, wait_for

    job = enqueue(conn, "ok")
    proc = subprocess.Popen(awc_command("wait", str(job), "--timeout", "60"), env=awc_env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                   "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
        wait_for(lambda: conn.execute("SELECT waited FROM awc.jobs WHERE id = %s",
                                      (job,)).fetchone() == (True,), what="the wait to begin")
        (pid,) = wait_for(lambda: conn.execute(waiting).fetchone(), what="the wait's backend")
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # A new connection waits again before the job runs.
        wait_for(lambda: (row := conn.execute(waiting).fetchone()) and row[0] != pid,
                 what="the wait on a new connection")
        run_all(conn, registry_with(ok=ok))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out.strip(), err) == (0, f'{{"job": {job}}}', "")


@pytest.mark.parametrize("size", [3, 200])  # one INSERT statement; a COPY
def test_a_graph_goes_in_waiting_with_no_row_written_twice(
        conn: psycopg.Connection[Any], size: int) -> None:
    """A child goes in waiting and a parent marked as one: inserted ready
    and then marked waiting, every child left an entry in each of the
    claim's indexes, which every claim walked past until a vacuum, and its
    enqueue wrote it twice. Only what the call cannot know before it inserts
    is written again: an existing parent marked as one."""
    done = enqueue(conn, "ok")
    run_all(conn, registry_with(ok=ok))
    live = enqueue(conn, "ok")
    graph = ([{"kind": "ok"}] + [{"kind": "ok", "after": ["#0"]} for _ in range(size)]
             + [{"kind": "ok", "after": [f"#{n}" for n in range(1, size + 1)],
                 "on_parent_failure": "run"},
                {"kind": "ok", "after": [done, live, f"#{size + 1}"]},
                {"kind": "ok", "after": [done]},
                # With its own run_at: a COPY's second part (tick.copy_in).
                {"kind": "ok", "after": ["#0"], "on_parent_failure": "run",
                 "run_at": datetime.now(UTC) - timedelta(seconds=1)}])
    written = ("SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables "
               "WHERE relid = 'awc.jobs'::regclass")
    with conn.transaction():
        before = conn.execute(written).fetchone()
        ids = enqueue_many(conn, graph)
        after = conn.execute(written).fetchone()
    assert before is not None and after is not None
    assert (after[0] - before[0], after[1] - before[1]) == (len(graph), 1)  # `live` marked
    rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, waiting, has_children, on_parent_failure FROM awc.jobs "
        "WHERE id = ANY(%s)", (ids,)).fetchall()}
    fan_in, after_both, after_done, timed = ids[-4:]
    assert rows[ids[0]] == (0, True, "cancel")
    assert {rows[i] for i in ids[1:size + 1]} == {(1, True, "cancel")}
    assert rows[fan_in] == (size, True, "run")
    assert rows[after_both] == (2, False, "cancel")  # `done` was final at enqueue
    assert rows[after_done] == (0, False, "cancel")
    assert rows[timed] == (1, False, "run")
    run_all(conn, registry_with(ok=ok))
    assert set(states(conn, ids)) == {"COMPLETED"}
