"""A bench compared with awc before a change (bench.common.install_before,
SPEC §14) must run that awc: `python -c` and `python -m`, run in this
checkout, put it first on sys.path, ahead of PYTHONPATH, and every "before"
figure was this checkout's own until bench.common.site_env said
PYTHONSAFEPATH (docs/decisions/0033, Measured)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import ROOT, site_env

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("mode", [["-c", "import tick; print(tick.__file__)"], ["-m", "tick"]])
def test_a_process_for_another_installation_imports_its_tick(
        tmp_path: Path, mode: list[str]) -> None:
    (tmp_path / "tick").mkdir()
    (tmp_path / "tick" / "__init__.py").write_text("")
    (tmp_path / "tick" / "__main__.py").write_text("import tick\nprint(tick.__file__)\n")
    ran = subprocess.run([sys.executable, *mode], env=site_env(str(tmp_path), {}), cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert Path(ran.stdout.strip()).parent == tmp_path / "tick", ran.stdout
