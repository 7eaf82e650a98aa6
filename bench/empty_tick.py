"""empty tick (SPEC §14): wall time of a cold `awc tick` process against an
empty, migrated database — interpreter start, imports, settings, connect,
migration check, maintenance, one empty claim, exit.

    python -m bench.empty_tick [--runs 7] [--checkout]

By default awc is a wheel of this checkout installed with its dependencies
in a venv of its own (`pip wheel`, `pip install`), timed as `awc tick`, as
an operator's timer runs it; --checkout times this checkout where it is.

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
import tempfile
from pathlib import Path
from typing import Any

from bench.common import (
    ROOT,
    bench_url,
    checkout_at,
    machine,
    median,
    report,
    reset,
    timed_process,
)
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


def once(env: dict[str, str], command: list[str] | None = None, cwd: Path = ROOT) -> float:
    argv = command or [sys.executable, "-m", "tick.cli", "tick"]
    took, code = timed_process(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    if code != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed with exit {code}")
    return took


def imports(env: dict[str, str], python: str = sys.executable,
            cwd: Path = ROOT) -> dict[str, float]:
    done = subprocess.run([python, "-X", "importtime", "-m", "tick.cli", "tick"],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)$", line)
        if match and match.group(3) in HEAVY and match.group(3) not in found:
            found[match.group(3)] = round(int(match.group(1)) / 1e6, 3)
    return found


def wheel_venv(scratch: Path, source: Path = ROOT) -> str:
    """A wheel of this checkout (or of `source`) installed, with its
    dependencies, in a venv of its own, as an operator installs awc: that
    venv's python."""
    dist, venv = scratch / "dist", scratch / "venv"
    # Without PYTHONPATH: a checkout on it (bench.all's) would read as awc
    # already installed, and pip would install nothing.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
                    str(source)], check=True, capture_output=True, env=env)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    wheel = next(dist.glob("*.whl"))
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True,
                   capture_output=True, env=env)
    return str(venv / "bin" / "python")


def before_tick(rev: str, scratch: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """`awc tick` of a wheel of awc at `rev`, and its environment: a
    database of its own, migrated by that awc (a newer schema it would
    refuse)."""
    with checkout_at(rev, scratch / "tree") as tree:
        python = wheel_venv(scratch, tree)
    url = bench_url(database="awc_bench_before_empty_tick")
    awc = str(Path(python).parent / "awc")
    subprocess.run([awc, "migrate"], env={**env, "DATABASE_URL": url}, cwd=scratch, check=True,
                   capture_output=True)
    return [awc, "tick"], {**env, "DATABASE_URL": url}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--checkout", action="store_true",
                        help="time this checkout as it runs here, not a wheel installed apart")
    parser.add_argument("--before", metavar="REV",
                        help="also time a wheel of awc at REV, interleaved (a database of its own)")
    args = parser.parse_args(argv)
    url = bench_url()
    with connect(url) as conn:
        reset(conn)
    with tempfile.TemporaryDirectory(prefix="awc-wheel-") as scratch:
        if args.checkout:
            python, command, env, cwd = sys.executable, None, env_for(url), ROOT
        else:
            # Run from the scratch folder: `python -m` puts its working directory first.
            python = wheel_venv(Path(scratch))
            command = [str(Path(python).parent / "awc"), "tick"]
            env = {k: v for k, v in env_for(url).items() if k != "PYTHONPATH"}
            cwd = Path(scratch)
        before = before_tick(args.before, Path(scratch) / "before", env) if args.before else None
        once(env, command, cwd)  # warm the page cache and .pyc files, as a timer's second run
        if before is not None:
            once(before[1], before[0], cwd)
        runs, floors, bare, earlier = [], [], [], []
        for _ in range(args.runs):  # interleaved: the machine's noise falls on all of them
            runs.append(once(env, command, cwd))
            if before is not None:
                earlier.append(once(before[1], before[0], cwd))
            # The reference: the interpreter importing the driver every tick needs.
            floors.append(once(env, [python, "-c", "import psycopg"], cwd))
            bare.append(once(env, [python, "-c", "pass"], cwd))
        figures = {
            "empty_tick_s": round(median(runs), 3),
            "runs_s": [round(r, 3) for r in runs],
            "bare_python_start_s": round(median(bare), 3),
            "import_psycopg_s": round(median(floors), 3),
            "ratio_to_import_psycopg": round(median(runs) / median(floors), 3),
            "import_s": imports(env, python, cwd),
        }
        if earlier:
            figures.update(before=args.before, empty_tick_before_s=round(median(earlier), 3),
                           ratio_to_before=round(median(runs) / median(earlier), 3))
    with connect(url) as conn:
        report("empty_tick", figures, {
            "machine": machine(conn), "runs": args.runs,
            "command": "awc tick (cold process), " + (
                "this checkout" if args.checkout
                else "a wheel of this checkout installed in a venv of its own")})
    return figures


if __name__ == "__main__":
    main()
