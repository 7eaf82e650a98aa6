"""What every test module keeps to, read as source (nothing is imported).

- No test module imports another test module: what tests share lives in
  tests/support.py (helpers) or tests/conftest.py (fixtures), so running one
  module never runs, or depends on, another's module-level code.
- Every test checks something. A `test_*` function passes the rule when its
  body has an `assert`, a `pytest.raises`/`pytest.warns`/`pytest.fail`, or a
  call to a helper whose name starts with `assert_`, `check_` or `expect_`
  (such a helper is itself read: it must assert). A test without any of these
  only proves that its code does not raise, and says so nowhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

TESTS = ROOT / "tests"
CHECKERS = ("assert_", "check_", "expect_")
PYTEST_CHECKS = {"raises", "warns", "fail", "deprecated_call"}


def module_paths() -> list[Path]:
    return sorted(TESTS.glob("test_*.py"))


def imported_test_modules(path: Path) -> list[str]:
    """The test modules `path` imports, wherever the import is."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import test_x / from .test_x import y
                base = f"tests.{base}" if base else "tests"
            names = [base] if is_test_module(base) else [f"{base}.{a.name}" for a in node.names]
        found += [n for n in names if is_test_module(n)]
    return sorted(set(found))


def is_test_module(name: str) -> bool:
    parts = name.split(".")
    return parts[-1].startswith("test_") and parts[:-1] in ([], ["tests"])


def checks(node: ast.AST) -> bool:
    """True if `node` asserts, or calls pytest's or a named checker."""
    for child in ast.walk(node):
        if isinstance(child, ast.Assert):
            return True
        if isinstance(child, ast.Call):
            func = child.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            on_pytest = isinstance(func, ast.Attribute) and ast.unparse(func.value) == "pytest"
            if (on_pytest and name in PYTEST_CHECKS) or name.startswith(CHECKERS):
                return True
    return False


def unchecked_tests(source: str) -> list[str]:
    """The `test_*` functions of `source` that check nothing."""
    tree = ast.parse(source)
    return sorted(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
        and not checks(node)
    )


def checkers_that_check_nothing(source: str) -> list[str]:
    """Helpers named like checkers (`assert_*`, ...) whose body checks nothing."""
    tree = ast.parse(source)
    return sorted(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith(CHECKERS)
        and not any(checks(statement) for statement in node.body)
    )


@pytest.mark.parametrize("path", module_paths(), ids=lambda p: p.name)
def test_no_test_module_imports_another(path: Path) -> None:
    assert imported_test_modules(path) == [], (
        f"{path.name} imports a test module: share it through tests/support.py"
    )


@pytest.mark.parametrize("path", sorted(TESTS.glob("*.py")), ids=lambda p: p.name)
def test_every_test_checks_something(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert unchecked_tests(source) == [], f"{path.name}: tests that check nothing"
    assert checkers_that_check_nothing(source) == [], f"{path.name}: checkers that check nothing"


@pytest.mark.parametrize(
    ("source", "unchecked"),
    [
        ("def test_a():\n    assert 1\n", []),
        ("def test_a():\n    run()\n", ["test_a"]),
        ("def test_a():\n    with pytest.raises(E):\n        run()\n", []),
        ("def test_a():\n    with pytest.warns(W):\n        run()\n", []),
        ("def test_a():\n    assert_state(1)\n", []),
        ("def test_a():\n    self.check_rows()\n", []),
        ("def test_a():\n    expect_text('x')\n", []),
        ("def test_a():\n    raises(E)\n", ["test_a"]),  # not pytest's
        ("def helper():\n    run()\n", []),  # not a test
        ("class T:\n    def test_a(self):\n        pass\n", ["test_a"]),
    ],
)
def test_the_checking_rule(source: str, unchecked: list[str]) -> None:
    assert unchecked_tests(source) == unchecked


@pytest.mark.parametrize(
    ("source", "imported"),
    [
        ("from tests.support import x\n", []),
        ("from tests.test_tick import registry_with\n", ["tests.test_tick"]),
        ("def f():\n    from tests.test_lambda import Context\n", ["tests.test_lambda"]),
        ("import tests.test_tick\n", ["tests.test_tick"]),
        ("from tests import kinds\n", []),
    ],
)
def test_the_import_rule(tmp_path: Path, source: str, imported: list[str]) -> None:
    path = tmp_path / "test_example.py"
    path.write_text(source, encoding="utf-8")
    assert imported_test_modules(path) == imported
