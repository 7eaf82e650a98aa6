"""SPEC §23: `awc jobs show` prints a job's key (null without one)."""

from __future__ import annotations

import json

from tests.support import run_awc


def test_awc_jobs_show_prints_the_key(awc_env: dict[str, str]) -> None:
    for key, expected in ((["--key", "tenant-7"], "tenant-7"), ([], None)):
        done = run_awc(awc_env, "enqueue", "noop", *key)
        assert done.returncode == 0, done.stderr
        shown = run_awc(awc_env, "jobs", "show", done.stdout.strip())
        assert json.loads(shown.stdout)["key"] == expected
