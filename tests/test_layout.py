"""docs/decisions/0009: the layout follows a job, and stays that way.

Every module of `tick/` and `handlers/` is read as source (nothing is
imported): none is over 400 lines, the imports between them form no
circle, not even through imports made only for type checking (`if
TYPE_CHECKING:`), and no lower layer imports a higher one at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT

MAX_LINES = 400

# Lower layers first. A module may import its own layer and the ones below.
LAYERS: list[tuple[str, ...]] = [
    # The leaves: text, errors, settings, statements, db, migrations, loaders.
    ("tick.text", "tick.errors", "tick.faults", "tick.redaction", "tick.tracebacks",
     "tick.statements", "tick.setting_values", "tick.settings", "tick.db", "tick.migrate",
     "tick.loaders", "tick.embedded",
     "tick.schedules.times", "tick.history", "tick.watchdog", "tick.budget", "tick.words",
     "tick.report", "tick.timeouts", "tick.trace_context", "tick.payloads", "tick.problems"),
    ("tick.queue", "tick.producer", "tick.copy_in", "tick.parts", "tick.maintenance", "tick.admin",
     "tick.schedules", "tick.limits", "tick.bulk", "tick.parents", "tick.waiting"),
    ("tick.engine.outcomes", "tick.engine.backoff", "tick.engine.context",
     "tick.engine.registry"),
    ("tick.events", "tick.metrics", "tick.export"),
    ("tick.engine.spec",),  # what a run is given: below every part that uses it
    ("tick.engine.spans",),  # tracing (SPEC §21): the slots, flush and coordinator call it
    ("tick.engine.slots", "tick.engine.claims", "tick.engine.flush", "tick.engine.row",
     "tick.engine.leases", "tick.engine.heartbeats",
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
    ("tick.demo", "tick.cli_types", "tick.cli_queue", "tick.cli_history", "tick.cli_schedules",
     "tick.cli_limits", "tick.cli_ui", "tick.cli_actions", "tick.cli"),
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


def imports(name: str, path: Path, known: set[str], *, typing: bool = False) -> set[str]:
    """The awc modules `name` imports when it runs, wherever the import is;
    with `typing`, also those it imports only for type checking."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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


GRAPH = {name: imports(name, path, set(sources())) for name, path in sources().items()}
# Type-only imports included: a circle through them is still a circle to read.
TYPED_GRAPH = {
    name: imports(name, path, set(sources()), typing=True) for name, path in sources().items()
}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of modules (Tarjan), each as one
    circle through it, the public API `tick` left out: it is lazy."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def edges(name: str) -> list[str]:
        return sorted(t for t in graph.get(name, ()) if t != PUBLIC and t in graph)

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in edges(name):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            group: list[str] = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == name:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(n for n in graph if n != PUBLIC):
        if name not in index:
            visit(name)
    return [shortest_circle(group, edges) for group in sorted(groups)]


def shortest_circle(group: list[str], edges: Callable[[str], list[str]]) -> list[str]:
    """The shortest way from the group's first module back to itself."""
    start, members = group[0], set(group)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for name in frontier:
            for target in edges(name):
                if target not in members or target in came:
                    continue
                came[target] = name
                if target == start:
                    trail = [start]
                    while trail[-1] != start or len(trail) == 1:
                        trail.append(came[trail[-1]])
                    return [*reversed(trail)]
                following.append(target)
        frontier = following
    return [*group, start]  # not reached: a group is a circle


def depth(graph: dict[str, set[str]]) -> int:
    """The import graph's depth: the most modules on one chain of imports
    (a leaf is 1), the public API left out. A circle counts once."""
    memo: dict[str, int] = {}

    def walk(name: str, open_: frozenset[str]) -> int:
        if name in memo:
            return memo[name]
        below = [
            walk(t, open_ | {name})
            for t in graph.get(name, ())
            if t != PUBLIC and t in graph and t not in open_ and t != name
        ]
        memo[name] = 1 + max(below, default=0)
        return memo[name]

    return max((walk(name, frozenset()) for name in sorted(graph) if name != PUBLIC), default=0)


@pytest.mark.parametrize("name", sorted(sources()))
def test_no_module_is_over_400_lines(name: str) -> None:
    lines = len(sources()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def test_the_imports_form_no_circle() -> None:
    found = circles(TYPED_GRAPH)
    assert not found, "import circles (type-only imports included):\n" + "\n".join(
        " -> ".join(circle) for circle in found
    )


def test_the_circle_finder_finds_a_circle_through_type_only_imports(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c", PUBLIC}, "c": {"a"}, "d": {"a"}, PUBLIC: {"d"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    assert depth({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == 3
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tick.db\n"
    path = tmp_path / "typing_only_example.py"
    path.write_text(source, encoding="utf-8")
    assert imports("x", path, {"tick.db"}) == set()
    assert imports("x", path, {"tick.db"}, typing=True) == {"tick.db"}


def test_the_import_graph_depth_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(
            f"\nimport graph depth: {depth(GRAPH)} at run time, "
            f"{depth(TYPED_GRAPH)} with type-only imports"
        )
    assert depth(TYPED_GRAPH) >= depth(GRAPH) >= 1


def test_no_lower_layer_imports_a_higher_one() -> None:
    upward = [f"{name} imports {target}" for name, targets in sorted(GRAPH.items())
              for target in sorted(targets)
              if target != PUBLIC and name != PUBLIC and layer_of(target) > layer_of(name)]
    assert not upward, "\n".join(upward)
