"""SPEC §7.2: the supervisor restarts a crashed part with backoff, gives it
up after a streak, and /readyz says so."""

from __future__ import annotations

import json
import threading
import time

from tests.support import free_port, http_get, wait_for
from tick.drivers.supervisor import Supervisor


def test_supervisor_gives_up_on_a_part_that_always_crashes() -> None:
    from tick.drivers.health import make_server, serve_until

    stop = threading.Event()
    sup = Supervisor(stop, base_delay=0.02, max_delay=1, healthy_secs=60)
    runs: list[float] = []

    def crasher(stop: threading.Event) -> None:
        runs.append(time.monotonic())
        raise RuntimeError("always")

    def steady(stop: threading.Event) -> None:
        stop.wait()

    sup.add("crasher", crasher)
    sup.add("steady", steady)
    port = free_port()
    server = make_server("127.0.0.1", port, sup, lambda: b"")
    sup.add("metrics-server", lambda s: serve_until(server, s))
    try:
        wait_for(lambda: sup.dead() == ["crasher"], timeout=10, what="the part to be given up")
        state = sup.parts["crasher"]
        assert len(runs) == 6 and state.total_restarts == 5
        assert state.delays == sorted(state.delays)  # growing backoff
        code, body = http_get(f"http://127.0.0.1:{port}/readyz")
        assert code == 503 and json.loads(body)["dead"] == ["crasher"]
        code, body = http_get(f"http://127.0.0.1:{port}/healthz")
        assert code == 200 and json.loads(body)["parts"]["steady"] == "running"
    finally:
        stop.set()
        assert sup.join(5) == []


def test_supervisor_resets_the_budget_after_a_healthy_run() -> None:
    stop = threading.Event()
    sup = Supervisor(stop, base_delay=0.01, healthy_secs=0.2, budget=2)
    runs = {"n": 0}

    def flaky(stop: threading.Event) -> None:
        runs["n"] += 1
        if runs["n"] in (1, 2):
            raise RuntimeError("early crash")
        if runs["n"] == 3:
            time.sleep(0.3)  # a healthy stretch, then a crash
            raise RuntimeError("late crash")
        stop.wait()

    sup.add("flaky", flaky)
    try:
        wait_for(lambda: runs["n"] == 4, timeout=5, what="the fourth run")
        state = sup.parts["flaky"]
        assert state.status == "running" and state.restarts == 1 and state.total_restarts == 3
        assert sup.dead() == []
    finally:
        stop.set()
        sup.join(5)

