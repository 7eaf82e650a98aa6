"""SPEC §2, §9: one `awc tick`'s metrics, exported to a node_exporter
textfile and to a real Pushgateway."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import free_port, http_get, http_up, run_awc, wait_for
from tick.producer import enqueue, enqueue_many


def test_tick_writes_a_textfile_and_keeps_the_last_success_after_a_failure(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "awc.prom"
    enqueue_many(conn, [{"kind": "noop"}] * 3)
    done = run_awc({**awc_env, "AWC_METRICS_TEXTFILE": str(path), "AWC_TICK_MAX_JOBS": "1"},
                   "tick")
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    line = next(ln for ln in text.splitlines()
                if ln.startswith('awc_tick_last_success_timestamp_seconds{driver="tick"}'))
    first = float(line.rsplit(" ", 1)[1])
    assert abs(first - time.time()) < 60
    assert 'awc_background_jobs_total{kind="noop",outcome="completed"} 1.0' in text
    assert 'awc_queue_ready_jobs{kind="noop"} 2.0' in text  # what the next tick finds
    assert 'awc_queue_oldest_ready_age_seconds{kind="noop"}' in text
    failed = run_awc({**awc_env, "AWC_METRICS_TEXTFILE": str(path),
                      "DATABASE_URL": "postgresql://x:pw@127.0.0.1:1/x"}, "tick")
    assert failed.returncode == 1
    kept = next(ln for ln in path.read_text().splitlines()
                if ln.startswith('awc_tick_last_success_timestamp_seconds{driver="tick"}'))
    assert float(kept.rsplit(" ", 1)[1]) == first
    promtool = shutil.which("promtool")
    if promtool:
        checked = subprocess.run([promtool, "check", "metrics"], input=text,
                                 capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_textfile_counters_are_cumulative_across_runs(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    # SPEC §2: each `awc tick` is a new process, but rate() and increase()
    # need a counter that only grows.
    path = tmp_path / "awc.prom"
    enqueue_many(conn, [{"kind": "noop"}] * 5)
    env = {**awc_env, "AWC_METRICS_TEXTFILE": str(path), "AWC_TICK_MAX_JOBS": "2"}
    for runs, completed in ((1, 2), (2, 4), (3, 5)):
        done = run_awc(env, "tick")
        assert done.returncode == 0, done.stderr
        text = path.read_text()
        assert f'awc_background_jobs_total{{kind="noop",outcome="completed"}} {completed}.0' \
            in text
        assert f'awc_tick_duration_seconds_count{{driver="tick"}} {runs}.0' in text
        assert f'awc_job_duration_seconds_count{{kind="noop"}} {completed}.0' in text
        assert "_created" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".awc.prom.lock", "awc.prom"]



def _families(path: Path) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    with open(path, encoding="utf-8", newline="") as source:
        return {f.name: f for f in text_string_to_metric_families(source.read())}


def test_a_kind_with_a_carriage_return_resets_no_counter(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """The previous file was read with newlines translated: a `\r` inside a
    label value (a kind written by plain SQL) broke its parse, and the next
    run started every counter afresh."""
    path = tmp_path / "awc.prom"
    env = {**awc_env, "AWC_METRICS_TEXTFILE": str(path)}
    enqueue_many(conn, [{"kind": "noop"}] * 3)
    conn.execute("INSERT INTO awc.jobs (kind) VALUES (E'cr\\rkind')")
    assert run_awc(env, "tick").returncode == 0
    enqueue_many(conn, [{"kind": "noop"}] * 2)
    assert run_awc(env, "tick").returncode == 0
    jobs = _families(path)["awc_background_jobs"]
    done = {s.labels["kind"]: s.value for s in jobs.samples if s.name.endswith("_total")
            and s.labels["outcome"] == "completed"}
    assert done["noop"] == 5.0


def test_the_textfile_keeps_at_most_128_label_sets_and_every_count(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """Each run carried every earlier run's label sets: ticks of new kinds
    grew the file by 127 sets each, without end. Past the limit they are
    added into the overflow set."""
    path = tmp_path / "awc.prom"
    env = {**awc_env, "AWC_METRICS_TEXTFILE": str(path), "AWC_WORKER_CONCURRENCY": "32",
           "AWC_TICK_MAX_JOBS": "1000"}
    for run in range(3):
        conn.execute("INSERT INTO awc.jobs (kind) SELECT 'k' || %s || '-' || n "
                     "FROM generate_series(1, 150) AS n", (run,))
        assert run_awc(env, "tick").returncode == 0
    jobs = _families(path)["awc_background_jobs"]
    totals = [s for s in jobs.samples if s.name.endswith("_total")]
    assert len({tuple(sorted(s.labels.items())) for s in totals}) <= 128
    assert sum(s.value for s in totals) == 450.0
    durations = _families(path)["awc_job_duration_seconds"]
    counts = [s for s in durations.samples if s.name.endswith("_count")]
    assert len(counts) <= 128 and sum(s.value for s in counts) == 450.0

def test_tick_pushes_to_a_real_pushgateway(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    binary = shutil.which("prometheus-pushgateway")
    if binary is None:
        pytest.skip("prometheus-pushgateway (Debian package) is not installed; .ci/run installs it")
    port = free_port()
    gateway = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/-/ready"), what="the pushgateway")
        enqueue(conn, "noop")
        url = f"http://127.0.0.1:{port}"
        assert run_awc({**awc_env, "AWC_PUSHGATEWAY_URL": url}, "tick").returncode == 0
        _, text = http_get(f"{url}/metrics")
        assert 'awc_background_jobs_total{instance="awc-worker",job="awc_tick",kind="noop",' \
               'outcome="completed"} 1' in text
        success = [ln for ln in text.splitlines()
                   if ln.startswith("awc_tick_last_success_timestamp_seconds")]
        assert len(success) == 1
        failed = run_awc({**awc_env, "AWC_PUSHGATEWAY_URL": url, "AWC_TICK_MAX_JOBS": "1",
                          "DATABASE_URL": "postgresql://x:pw@127.0.0.1:1/x"}, "tick")
        assert failed.returncode == 1
        _, after = http_get(f"{url}/metrics")
        assert [ln for ln in after.splitlines()
                if ln.startswith("awc_tick_last_success_timestamp_seconds")] == success
    finally:
        gateway.terminate()
        gateway.wait(10)






@pytest.mark.parametrize("where", ["a directory", "in a missing directory", "not a .prom file"])
def test_a_textfile_node_exporter_would_not_read_is_a_startup_error(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path, where: str
) -> None:
    # SPEC §2: a directory, or a path in a directory that does not exist (a
    # typo), is refused before any job runs; awc creates no directory.
    path = {"a directory": tmp_path,
            "in a missing directory": tmp_path / "textfle" / "awc.prom",
            "not a .prom file": tmp_path / "awc.txt"}[where]
    job = enqueue(conn, "noop")
    done = run_awc({**awc_env, "AWC_METRICS_TEXTFILE": str(path)}, "tick")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("awc: AWC_METRICS_TEXTFILE: "), done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created, not even a directory
    state = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s", (job,))
    assert state.fetchone() == ("PENDING", 0)
