"""SPEC §4.2 "No row stops the queue": every timestamp PostgreSQL accepts is
handled, by the claim, the operator commands and the handlers."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.support import run_awc
from tick import tick
from tick.engine.registry import Registry, handler
from tick.producer import enqueue

ODD_INSTANTS = ("infinity", "-infinity", "20000-01-01 00:00:00+00", "0044-03-15 00:00:00+00 BC")


def insert(conn: psycopg.Connection[Any], kind: str, run_at: str) -> int:
    row = conn.execute("INSERT INTO awc.jobs (kind, run_at) VALUES (%s, %s::timestamptz) "
                       "RETURNING id", (kind, run_at)).fetchone()
    assert row is not None
    return int(row[0])


def test_no_run_at_stops_the_claim(conn: psycopg.Connection[Any]) -> None:
    reg = Registry()
    handler("k", registry=reg)(lambda ctx, p: None)
    ids = {at: insert(conn, "k", at) for at in ODD_INSTANTS}
    normal = enqueue(conn, "k")
    report = tick(conn, registry=reg, max_secs=30)
    states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    # -infinity and BC are in the past: ready now. infinity and 20000 AD: never yet.
    assert report.completed == 3 and report.stop_reason == "drained"
    assert states[ids["-infinity"]] == states[ids[ODD_INSTANTS[3]]] == "COMPLETED"
    assert states[normal] == "COMPLETED"
    assert states[ids["infinity"]] == states[ids[ODD_INSTANTS[2]]] == "PENDING"


def test_operator_commands_show_timestamps_python_cannot_hold(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    ids = [insert(conn, "k", at) for at in ODD_INSTANTS]
    listed = run_awc(awc_env, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    run_ats = {json.loads(line)["id"]: json.loads(line)["run_at"]
               for line in listed.stdout.splitlines()}
    assert run_ats[ids[0]] == "infinity" and run_ats[ids[1]] == "-infinity"
    assert run_ats[ids[2]] == "20000-01-01 00:00:00+00"
    shown = run_awc(awc_env, "jobs", "show", str(ids[0]))
    assert shown.returncode == 0 and json.loads(shown.stdout)["run_at"] == "infinity"
    table = run_awc(awc_env, "jobs", "list")
    assert table.returncode == 0 and "infinity" in table.stdout
    status = run_awc(awc_env, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["by_state"]["PENDING"] == 4


@pytest.mark.parametrize("expires_at", ["infinity", "20000-01-01"])
def test_a_workspace_that_never_expires_stays_active(
    db_url: str, conn: psycopg.Connection[Any], expires_at: str
) -> None:
    from tick.handlers.runtime import runtime
    from tick.handlers.stores.memory import MemoryStore

    from tests.support import configure_handlers as configure
    from tests.support import drain

    configure(db_url, MemoryStore())
    conn.execute("INSERT INTO awc.tenants (id) VALUES ('acme')")
    workspace = conn.execute(
        "INSERT INTO awc.workspaces (tenant_id, expires_at) VALUES ('acme', %s::timestamptz) "
        "RETURNING id", (expires_at,)).fetchone()[0]
    enqueue(conn, "workspace_expire", {"workspace_id": str(workspace)})
    report = drain(conn)
    assert report.completed == 1 and report.failed == 0 and report.retried == 0
    state = conn.execute("SELECT state FROM awc.workspaces WHERE id = %s", (workspace,))
    assert state.fetchone() == ("ACTIVE",)
    runtime().close()
