"""The cron log (README "Deploying", SPEC §9, §22): every line the shipped
cron line appends to /var/log/awc/tick.log carries its time. The line runs
`awc tick --as-events`: the report is a `tick` event, a failure a
`tick_failed` event, each with `ts`, among the job events; `--json` keeps
exactly the TickReport keys (SPEC §6)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from tests.support import ROOT, run_awc
from tick.producer import enqueue_many
from tick.report import TickReport

CRON = ROOT / "cron"


def _cron_command(tmp_path: Path, settings: str) -> tuple[str, Path]:
    """The shipped cron line's command, pointed at this checkout's awc and
    scratch files; the log it appends to."""
    (line,) = [ln for ln in (CRON / "awc-tick").read_text().splitlines() if ln.startswith("* ")]
    env_file = tmp_path / "awc.env"
    env_file.write_text(settings)
    log = tmp_path / "tick.log"
    awc = f"{shlex.quote(sys.executable)} -m tick.cli"
    command = (line.split(None, 6)[6]
               .replace("/etc/awc/awc.env", str(env_file))
               .replace("/usr/local/bin/awc", awc)
               .replace("/var/log/awc/tick.log", str(log))
               .replace("/run/lock/awc-tick.lock", str(tmp_path / "lock")))
    return command, log


def _events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        event = json.loads(line)  # every line is an event, none a bare summary or `awc:`
        datetime.fromisoformat(event["ts"])
        events.append(event)
    return events


def test_every_line_the_cron_line_logs_carries_its_time(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    enqueue_many(conn, [{"kind": "noop"}] * 2 + [{"kind": "fail", "max_attempts": 1}])
    settings = "".join(f"{k}={shlex.quote(v)}\n" for k, v in awc_env.items()
                       if k in ("DATABASE_URL", "AWC_CAS_URL", "AWC_HANDLER_MODULES"))
    command, log = _cron_command(tmp_path, settings)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, timeout=90)
    assert done.returncode == 0
    events = _events(log)
    (report,) = [e for e in events if e["event"] == "tick"]
    assert (report["claimed"], report["completed"], report["failed"]) == (3, 2, 1)
    assert set(report) - {"ts", "level", "event"} == set(TickReport().as_dict())
    assert sum(1 for e in events if e["event"].startswith("job_")) == 3
    # A tick that fails says so in the log, with its time and no secret.
    failing = settings.replace("DATABASE_URL=", "#") + (
        "DATABASE_URL=postgresql://awc:Hunter2pw@127.0.0.1:1/awc\n")
    command, log = _cron_command(tmp_path, failing)
    log.unlink()
    done = subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, timeout=90)
    assert done.returncode == 1
    (failed,) = _events(log)
    assert (failed["event"], failed["level"]) == ("tick_failed", "error")
    assert failed["error"].startswith("cannot connect to 127.0.0.1:1/awc")
    assert "Hunter2pw" not in log.read_text()


def test_the_report_keys_of_tick_json_stay_the_specs(awc_env: dict[str, str]) -> None:
    done = run_awc(awc_env, "tick", "--json")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == set(TickReport().as_dict())
    both = run_awc(awc_env, "tick", "--json", "--as-events")
    assert both.returncode == 2 and "--as-events" in both.stderr
