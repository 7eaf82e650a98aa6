"""The host install's settings (README "Deploying", "Writing a handler",
SPEC §22): the shipped awc.env and units choose no object store for the
operator, so none can need an extra the installer left out, and each store
they offer is one the default install can open."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from tests.support import ROOT, run_awc
from tick.producer import enqueue

CRON = ROOT / "cron"


def test_the_shipped_settings_choose_no_store_and_offer_only_installed_ones() -> None:
    shipped = {path.name: path.read_text() for path in CRON.iterdir()
               if path.name in ("awc.env", "awc-tick", "awc-tick.service", "awc-loop.service")}
    assert len(shipped) == 4
    for name, text in shipped.items():
        active = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
        assert not any("AWC_CAS_URL" in ln for ln in active), name  # the operator chooses
    offered = re.findall(r"^# AWC_CAS_URL=(\w+)://.*$", shipped["awc.env"], re.MULTILINE)
    assert set(offered) == {"memory", "file", "s3"}
    s3 = next(ln for ln in shipped["awc.env"].splitlines() if "AWC_CAS_URL=s3://" in ln)
    assert "s3 extra" in s3
    # The installer's default package carries that extra.
    install = (CRON / "install-host.sh").read_text()
    assert 'package="${2:-$(dirname "$here")[s3]}"' in install


def test_a_plain_job_queue_sets_a_memory_store_and_the_setting_stays_required(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """README "Writing a handler": AWC_CAS_URL=memory:// for a plain queue;
    unset, `awc tick` refuses to start naming it (the built-in storage kinds
    are always registered) and claims nothing."""
    job = enqueue(conn, "noop")
    unset = run_awc({k: v for k, v in awc_env.items() if k != "AWC_CAS_URL"}, "tick")
    assert unset.returncode == 1 and unset.stderr.startswith("awc: AWC_CAS_URL is required")
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() == (
        "PENDING",)
    done = run_awc({**awc_env, "AWC_CAS_URL": "memory://"}, "tick")
    assert done.returncode == 0, done.stderr
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() == (
        "COMPLETED",)
