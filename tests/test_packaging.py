"""docs/decisions/0008: awc installs one top-level package, `tick`, so a
user's own modules (a `handlers` package is common) can neither break awc
nor be broken by it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import ROOT, awc_command
from tick.producer import enqueue


def user_app(root: Path) -> Path:
    """An application with its own `handlers` package holding an awc kind."""
    package = root / "handlers"
    package.mkdir()
    (package / "__init__.py").write_text('OWNER = "the application"\n')
    (package / "jobs.py").write_text(
        "from tick import handler\n"
        "import handlers\n\n"
        "@handler('user_job')\n"
        "def user_job(ctx, payload):\n"
        "    return {'owner': handlers.OWNER}\n")
    return root


def test_a_users_handlers_package_runs_beside_awcs(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    app = user_app(tmp_path)
    job = enqueue(conn, "user_job")
    env = {**awc_env, "PYTHONPATH": f"{app}:{ROOT}", "AWC_HANDLER_MODULES": "handlers.jobs"}
    # In the application's own directory, as its deployment runs awc (the
    # repository root would put awc's source folder first on sys.path).
    done = subprocess.run(awc_command("tick", "--json"), env=env, cwd=app, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    row = conn.execute("SELECT state, result FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("COMPLETED", {"owner": "the application"})


def test_both_packages_import_in_one_process(tmp_path: Path) -> None:
    app = user_app(tmp_path)
    code = ("import handlers, tick.handlers.stores.base as store; "
            "print(handlers.OWNER, '|', store.digest_of(b''))")
    done = subprocess.run([sys.executable, "-c", code], cwd=app, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(app), "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    owner, digest = done.stdout.strip().split(" | ")
    assert owner == "the application" and digest.startswith("sha256:e3b0c442")


@pytest.mark.timeout(180)
def test_the_wheel_installs_only_the_tick_package(tmp_path: Path) -> None:
    # From a clean copy: a checkout's build/ may hold an older layout.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".mypy_cache", "awc-demo"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(source)], check=True, timeout=170,
                   capture_output=True)
    (wheel,) = tmp_path.glob("awc_worker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tick"}
    for shipped in ("tick/handlers/kinds/gc_sweep.py", "tick/handlers/py.typed",
                    "tick/migrations/0001_jobs.sql", "tick/sql/claim_jobs.sql",
                    "tick/engine/coordinator.py", "tick/drivers/aws_lambda.py",
                    # The console serves these from the installed package (SPEC §19).
                    "tick/ui/app.py", "tick/ui/templates/base.html",
                    "tick/ui/static/awc.js", "tick/ui/static/awc.css",
                    "tick/migrations/0007_console.sql"):
        assert shipped in names


def test_every_install_instruction_names_something_installable() -> None:
    # Issue 22 item 19: awc is installed from a checkout or a wheel built from
    # it; no instruction may name a package the registry does not have.
    import tomllib

    from tick.errors import missing_extra

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra in ("s3", "ui", "embedded", "lambda"):
        message = str(missing_extra("this", extra))
        assert f"pip install '.[{extra}]'" in message and extra in extras
    for path in [ROOT / "README.md", *(ROOT / "cron").iterdir(), *(ROOT / "scripts").iterdir(),
                 *(ROOT / "tick").rglob("*.py"), *(ROOT / "handlers").rglob("*.py")]:
        if path.is_file():
            text = path.read_text()
            assert "install 'awc-worker" not in text and "awc-worker[" not in text, path
