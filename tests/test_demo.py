"""SPEC §13: `awc demo` runs with no setting on an embedded PostgreSQL, and reruns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import ROOT, run_awc


@pytest.mark.timeout(180)
def test_demo_runs_end_to_end_and_reruns(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.pop("DATABASE_URL", None)  # the demo needs no setting at all
    env["PYTHONPATH"] = str(ROOT)
    for _ in range(2):
        done = run_awc(env, "demo", "--dir", str(tmp_path / "demo"), timeout=150)
        assert done.returncode == 0, done.stderr[-3000:]
        out = done.stdout
        for kind in ("snapshot_validate", "snapshot_scrub", "workspace_expire",
                     "snapshot_retain", "gc_sweep", "prune"):
            assert f"{kind}" in out
        assert out.count("COMPLETED") >= 8  # 7 jobs and the GC epoch
        assert "FAILED  " not in out.split("Snapshots")[0]  # no job failed
        snapshots = out.split("Snapshots")[1].split("Workspaces")[0]
        for name, state in (("intact", "READY"), ("missing-object", "FAILED"),
                            ("decays-before-scrub", "DEGRADED"), ("superseded", "DELETED")):
            line = next(ln for ln in snapshots.splitlines() if ln.strip().startswith(name))
            assert state in line, line
        assert "lapsed                EXPIRING" in out
    assert (tmp_path / "demo" / "store" / "acme" / "objects" / "sha256").is_dir()
