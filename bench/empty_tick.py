"""empty tick (SPEC §14): wall time of a cold `awc tick` process against an
empty, migrated database — interpreter start, imports, settings, connect,
migration check, maintenance, one empty claim, exit.

    python -m bench.empty_tick [--runs 7]

Also prints where the time goes: the cumulative import time of the heaviest
modules (`python -X importtime`), and the reference in the same run, the
interpreter importing psycopg and doing nothing else (`python -c "import
psycopg"`: no Python tick on PostgreSQL starts faster), and the ratio to it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, bench_url, machine, median, report, reset
from tick.db import connect

HEAVY = ("tick.cli", "tick.settings", "pydantic", "psycopg", "click", "tick.engine.api",
         "tick.drivers.once")


def env_for(url: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE would recompile awc's own modules on every run;
    # an installed awc has its .pyc files, as a timer's second run would.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWC_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", PYTHONPATH=str(ROOT))
    return env


def once(env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tick.cli", "tick"], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"awc tick failed with exit {done.returncode}")
    return took


def imports(env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tick.cli", "tick"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)$", line)
        if match and match.group(3) in HEAVY and match.group(3) not in found:
            found[match.group(3)] = round(int(match.group(1)) / 1e6, 3)
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    url = bench_url()
    with connect(url) as conn:
        reset(conn)
    env = env_for(url)
    once(env)  # warm the OS page cache and .pyc files, as a timer's second run would be
    runs = [once(env) for _ in range(args.runs)]
    python_only = median(
        _time([sys.executable, "-c", "pass"], env) for _ in range(args.runs))
    # The reference: the interpreter importing the driver every tick needs.
    floor = median(_time([sys.executable, "-c", "import psycopg"], env)
                   for _ in range(args.runs))
    figures = {
        "empty_tick_s": round(median(runs), 3),
        "runs_s": [round(r, 3) for r in runs],
        "bare_python_start_s": round(python_only, 3),
        "import_psycopg_s": round(floor, 3),
        "ratio_to_import_psycopg": round(median(runs) / floor, 3),
        "import_s": imports(env),
    }
    with connect(url) as conn:
        report("empty_tick", figures, {"machine": machine(conn), "runs": args.runs,
                                       "command": "awc tick (cold process)"})
    return figures


def _time(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, timeout=60)
    return time.perf_counter() - began


if __name__ == "__main__":
    main()
