"""docs/decisions/0009: the layout follows a job, and stays that way.

Every module of `tick/` and `handlers/` is read as source (nothing is
imported): none is over 400 lines, the imports between them form no
circle, and no lower layer imports a higher one. Imports made only for type
checking (`if TYPE_CHECKING:`) do not count: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

MAX_LINES = 400

# Lower layers first. A module may import its own layer and the ones below.
LAYERS: list[tuple[str, ...]] = [
    # The leaves: text, errors, settings, statements, db, migrations, loaders.
    ("tick.text", "tick.errors", "tick.redaction", "tick.tracebacks", "tick.statements",
     "tick.settings", "tick.db", "tick.migrate", "tick.loaders", "tick.embedded",
     "tick.schedules.times", "tick.history", "tick.watchdog", "tick.budget", "tick.words",
     "tick.report"),
    ("tick.queue", "tick.producer", "tick.maintenance", "tick.admin", "tick.schedules",
     "tick.limits", "tick.bulk"),
    ("tick.engine.outcomes", "tick.engine.backoff", "tick.engine.context",
     "tick.engine.registry"),
    ("tick.events", "tick.metrics", "tick.export"),
    ("tick.engine.spec",),  # what a run is given: below every part that uses it
    ("tick.engine.slots", "tick.engine.claims", "tick.engine.flush", "tick.engine.row",
     "tick.engine.parts", "tick.engine.maintain", "tick.engine.coordinator", "tick.engine.api",
     "tick.engine"),
    # The handlers: stores, then trees, then what the kinds share, then kinds.
    ("tick.handlers.stores.base", "tick.handlers.stores.memory", "tick.handlers.stores.file",
     "tick.handlers.stores.s3", "tick.handlers.stores"),
    ("tick.handlers.trees",),
    ("tick.handlers.runtime", "tick.handlers.producer", "tick.handlers.journal"),
    ("tick.handlers.kinds",),  # every module of kinds/
    ("tick.handlers",),
    ("tick.drivers",),  # every module of drivers/
    # The console (SPEC §19): request values and access, then what pages read
    # and do, how values look, the endpoints, the app.
    ("tick.ui", "tick.ui.access", "tick.ui.filters", "tick.ui.chart"),
    ("tick.ui.reads", "tick.ui.actions"),
    ("tick.ui.render",),
    ("tick.ui.console",),  # what every endpoint receives
    ("tick.ui.pages",),
    ("tick.ui.app",),
    ("tick.ui.serve",),  # the connections the app is served on
    ("tick.demo", "tick.cli_queue", "tick.cli_history", "tick.cli_schedules", "tick.cli_limits",
     "tick.cli_ui", "tick.cli_actions", "tick.cli"),
]
PUBLIC = "tick"  # the public API (tick/__init__.py): lazy, importable from any layer


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    if parts[0] == "handlers":
        parts = ["tick", *parts]  # installed as tick.handlers (decision 0008)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    found = {}
    for folder in ("tick", "handlers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = path
    return found


def runtime_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The awc modules `name` imports when it runs, wherever the import is."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(child) for child in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer_of(name: str) -> int:
    best, depth = -1, -1
    for n, members in enumerate(LAYERS):
        for member in members:
            if (name == member or name.startswith(member + ".")) and len(member) > depth:
                best, depth = n, len(member)
    if best < 0:
        raise AssertionError(f"{name} belongs to no layer of test_layout.LAYERS")
    return best


GRAPH = {name: runtime_imports(name, path, set(sources())) for name, path in sources().items()}


@pytest.mark.parametrize("name", sorted(sources()))
def test_no_module_is_over_400_lines(name: str) -> None:
    lines = len(sources()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def test_the_imports_form_no_circle() -> None:
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH.get(name, ())):
            if target == PUBLIC:
                continue
            if state.get(target) == "open":
                cycle = [*trail[trail.index(target):], target] if target in trail else [target]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


def test_no_lower_layer_imports_a_higher_one() -> None:
    upward = [f"{name} imports {target}" for name, targets in sorted(GRAPH.items())
              for target in sorted(targets)
              if target != PUBLIC and name != PUBLIC and layer_of(target) > layer_of(name)]
    assert not upward, "\n".join(upward)
