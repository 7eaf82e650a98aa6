"""SPEC §9, §10, §7.2: what a producer or a peer controls never grows awc's
memory, output or threads without bound."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tick.handlers.producer import ensure_tenant, register_snapshot
from tick.handlers.stores import open_store
from tick.handlers.trees import walk_closure, write_tree

from tests.support import ROOT, awc_command, wait_for
from tick.events import OVERFLOW, JobEvent
from tick.metrics import Metrics

# -- label values (item 13) ----------------------------------------------------------------


def test_long_kinds_overflow_and_keep_the_exposition_small() -> None:
    metrics = Metrics()
    kinds = [f"{n:02d}" + "k" * 100_000 for n in range(20)]
    metrics.processed([JobEvent(n, kind, "failed", "FAILED", 1, 0.01, 0.1)
                       for n, kind in enumerate(kinds)])
    for kind in kinds:
        metrics.claimed(kind, 0.1)
    text = metrics.exposition().decode()
    assert len(text) < 20_000
    assert f'awc_background_jobs_total{{kind="{OVERFLOW}",outcome="{OVERFLOW}"}} 20.0' in text


def test_an_overflow_gauge_holds_the_sum_of_the_kinds_it_stands_for() -> None:
    metrics = Metrics()
    for n in range(200):
        metrics.ready.set((f"kind-{n:03d}",), 2)
    metrics.ready.set(("x" * 101,), 5)  # too long: overflow, whatever the count
    value = metrics.registry.get_sample_value("awc_queue_ready_jobs", {"kind": OVERFLOW})
    assert value == 2 * (200 - 127) + 5
    metrics.ready.set(("kind-199",), 0)  # one overflow kind drains
    value = metrics.registry.get_sample_value("awc_queue_ready_jobs", {"kind": OVERFLOW})
    assert value == 2 * (200 - 128) + 5


def test_a_tick_over_huge_kinds_writes_a_small_textfile(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    for n in range(20):
        conn.execute("INSERT INTO awc.jobs (kind) VALUES (%s)", (f"{n}" + "k" * 100_000,))
    textfile = tmp_path / "awc.prom"
    done = subprocess.run(awc_command("tick"), env={**awc_env,
                          "AWC_METRICS_TEXTFILE": str(textfile)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert textfile.stat().st_size < 50_000
    assert len(done.stderr) < 40_000  # the events show a bounded part of each kind
    failed = conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'FAILED'").fetchone()
    assert failed == (20,)


# -- streamed objects (item 14) ---------------------------------------------------------


# `awc tick` that writes its own peak RSS (VmHWM, KiB) to $AWC_TEST_HWM at exit.
# Not getrusage: a child's ru_maxrss inherits the parent's high-water mark
# across vfork and exec, and the test process holds the blob it wrote.
HWM_TICK = """
import atexit, os
def hwm():
    with open('/proc/self/status') as status, open(os.environ['AWC_TEST_HWM'], 'w') as out:
        out.write(next(ln.split()[1] for ln in status if ln.startswith('VmHWM:')))
atexit.register(hwm)
from tick.cli import main
main(['tick'])
"""


def peak_rss_of_a_tick(env: dict[str, str], tmp_path: Path) -> int:
    """Run `awc tick` and return its own peak RSS in KiB."""
    out = tmp_path / "hwm"
    done = subprocess.run([sys.executable, "-c", HWM_TICK], env={**env, "AWC_TEST_HWM": str(out)},
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(out.read_text())


@pytest.mark.timeout(180)
def test_validating_a_128_mib_blob_keeps_memory_bounded(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    store = open_store(f"file://{store_dir}")
    env = {**awc_env, "AWC_CAS_URL": f"file://{store_dir}"}
    ensure_tenant(conn, "acme")
    peaks = {}
    for name, size in (("small", 1024), ("large", 128 << 20)):
        root = write_tree(store, "acme", {"blob.bin": os.urandom(1024) * (size // 1024)})
        snapshot = register_snapshot(conn, "acme", root)
        peaks[name] = peak_rss_of_a_tick(env, tmp_path)
        state = conn.execute("SELECT state FROM awc.snapshots WHERE id = %s", (snapshot,))
        assert state.fetchone() == ("READY",)
    growth_mib = (peaks["large"] - peaks["small"]) / 1024
    print(f"peak RSS: {peaks['small'] / 1024:.0f} MiB with a 1 KiB blob, "
          f"{peaks['large'] / 1024:.0f} MiB with a 128 MiB blob (+{growth_mib:.1f} MiB)")
    assert growth_mib < 32


def test_gc_mark_reads_trees_only() -> None:
    store = open_store("memory://")
    root = write_tree(store, "acme", {"a": "blob one", "d": {"b": "blob two", "c": "three"}})
    reads: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def chunks(self, tenant_id: str, digest: str) -> Any:
            reads.append(digest)
            return store.chunks(tenant_id, digest)

    walk = walk_closure(Counting(), "acme", root, verify=False)  # type: ignore[arg-type]
    assert len(walk.seen) == 5 and len(reads) == 2  # the two trees, no blob


# -- the metrics server (item 15) ------------------------------------------------------


class Collected:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def jobs(self, events: Any) -> None:
        pass

    def log(self, level: str, event: str, **fields: Any) -> None:
        self.lines.append((level, event, fields))


def serve(exposition: Any, events: Collected) -> tuple[Any, int, threading.Event]:
    from tick.drivers.health import make_server, serve_until
    from tick.drivers.supervisor import Supervisor

    stop = threading.Event()
    server = make_server("127.0.0.1", 0, Supervisor(stop), exposition, events)
    threading.Thread(target=serve_until, args=(server, stop), daemon=True).start()
    return server, server.server_address[1], stop


def healthz(port: int) -> int | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return None
    return int(head.split()[1]) if head.startswith(b"HTTP/") else None


def test_idle_connections_are_bounded_and_time_out() -> None:
    from tick.drivers.health import MAX_CONNECTIONS, REQUEST_TIMEOUT_SECS

    events = Collected()
    _, port, stop = serve(lambda: b"", events)
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(60)]
    try:
        time.sleep(0.5)  # let the server accept what it will
        assert threading.active_count() - before <= MAX_CONNECTIONS
        # Once their timeout passes the idle peers are dropped and it answers again.
        assert wait_for(lambda: healthz(port) == 200, timeout=REQUEST_TIMEOUT_SECS * 3,
                        interval=0.2, what="/healthz after the idle peers timed out")
    finally:
        for s in idle:
            s.close()
        stop.set()


def test_a_peer_that_hangs_up_costs_one_event_and_no_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    events = Collected()
    _, port, stop = serve(lambda: b"x" * (32 << 20), events)
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            s.recv(1024)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset, mid-answer
        wait_for(lambda: len(events.lines) == 3, timeout=10, what="three failed requests")
    finally:
        stop.set()
    assert {(level, event) for level, event, _ in events.lines} == {
        ("warning", "metrics_request_failed")}
    assert "Traceback" not in capfd.readouterr().err


def test_peers_that_hold_every_connection_never_keep_the_probe_out() -> None:
    # 16 peers sending a byte now and then (each read within the socket
    # timeout) or nothing held every slot, and every probe was refused: a
    # pod that reaches the port could have the worker restarted by its
    # liveness check. A new connection now closes the oldest at capacity,
    # and one open past CONNECTION_SECS is closed as the next one arrives.
    from tick.drivers.health import MAX_CONNECTIONS

    _, port, stop = serve(lambda: b"", Collected())
    holders = [socket.create_connection(("127.0.0.1", port)) for _ in range(MAX_CONNECTIONS)]
    trickling = holders[: MAX_CONNECTIONS // 2]
    try:
        for s in trickling:
            s.sendall(b"G")
        deadline = time.monotonic() + 12
        answered = 0
        while time.monotonic() < deadline:
            for s in trickling:
                with contextlib.suppress(OSError):
                    s.sendall(b"E")  # within the per-read timeout: the slot stays held
            # Each probe arrives as the holders (and the probes before) fill the slots.
            holders.extend(socket.create_connection(("127.0.0.1", port)) for _ in range(3))
            started = time.monotonic()
            assert healthz(port) == 200
            assert time.monotonic() - started < 2
            answered += 1
            time.sleep(0.5)
        assert answered >= 10
    finally:
        for s in holders:
            s.close()
        stop.set()
