"""SPEC §14: a cold `awc tick` imports what its run needs and no more
(decision 0040): settings without pydantic, the built-in kinds by name until
a job of theirs runs, a first claim without the limits' lanes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from tick.setting_values import Secret, integer
from tick.settings import load_settings

pytestmark = pytest.mark.timeout(120)

# `awc tick` run in-process, then the modules it imported.
PROBE = """
import json, sys
from tick.cli import main
sys.argv = ["awc", "tick"]
try:
    main()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def run_probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_an_empty_tick_imports_neither_pydantic_nor_the_built_in_kinds(
    awc_env: dict[str, str],
) -> None:
    env = {k: v for k, v in awc_env.items() if k != "AWC_HANDLER_MODULES"}
    found = run_probe(env)
    assert found["code"] in (0, None)
    loaded = set(found["modules"])
    assert "pydantic" not in loaded and "pydantic_core" not in loaded
    assert not {m for m in loaded if m.startswith("tick.handlers.kinds.")}
    assert "tick.handlers.kinds" in loaded  # the table of kinds and leases, not the kinds


def test_a_built_in_kind_is_claimed_and_run_by_a_tick_that_had_not_imported_it(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """The kind is registered by name, so the claim takes its job; the job's
    run imports the module and its payload model refuses a bad payload as
    the model always did (a failure naming the field, no traceback)."""
    from tick.producer import enqueue

    job = enqueue(conn, "snapshot_validate", {"tenant_id": "t", "snapshot_id": 12},
                  max_attempts=1)
    env = {k: v for k, v in awc_env.items() if k != "AWC_HANDLER_MODULES"}
    found = run_probe(env)
    assert "tick.handlers.kinds.snapshot_validate" in found["modules"]
    assert "pydantic" in found["modules"]
    state, error = conn.execute("SELECT state, last_error FROM awc.jobs WHERE id = %s",
                                (job,)).fetchone() or (None, None)
    assert state == "FAILED"
    assert "snapshot_id" in error and "Traceback" not in error


def test_a_deferred_kind_is_known_with_its_lease_and_loaded_once_on_first_use() -> None:
    """And registered by name again (a second `configure`, the next Lambda
    invocation's), it is the handler its module registered: the module is
    not imported twice, and its `@handler` does not run again."""
    import importlib

    from tick.engine.registry import REGISTRY

    module = "tests.deferred_kind"
    sys.modules.pop(module, None)
    try:
        REGISTRY.defer("awc_test_deferred", module, 42)
        assert "awc_test_deferred" in REGISTRY and module not in sys.modules
        assert REGISTRY.leases()["awc_test_deferred"] == 42
        entry = REGISTRY.get("awc_test_deferred")
        assert entry is not None and entry.fn(None, None) == "ran"  # type: ignore[arg-type]
        REGISTRY.defer("awc_test_deferred", module, 42)
        again = REGISTRY.get("awc_test_deferred")
        assert again is entry
        assert importlib.import_module(module).IMPORTS == ["imported"]
        assert REGISTRY.get("unknown") is None
    finally:
        REGISTRY._handlers.pop("awc_test_deferred", None)
        sys.modules.pop(module, None)


def test_a_second_configure_keeps_the_built_in_kinds_running(db_url: str) -> None:
    """The Lambda configures each warm invocation: a built-in kind whose
    module was imported by the first still runs after the second."""
    import tick.handlers as handlers
    from tick.handlers.stores.memory import MemoryStore

    from tick.engine.registry import REGISTRY
    from tick.settings import Settings

    settings = Settings(database_url=db_url, cas_url="memory://")
    handlers.configure(settings, MemoryStore())
    first = REGISTRY.get("prune")
    handlers.configure(settings, MemoryStore())
    second = REGISTRY.get("prune")
    assert first is not None and second is first
    assert second.fn.__name__ == "prune"


def test_a_secret_setting_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:hunter22secret@h/db")
    monkeypatch.setenv("AWC_UI_TOKEN", "t" * 20)
    settings = load_settings()
    for shown in (repr(settings), str(settings), repr(settings.database_url),
                  f"{settings.ui_token}", str(settings.database_url)):
        assert "hunter22secret" not in shown and "t" * 20 not in shown
    assert settings.dsn() == "postgresql://u:hunter22secret@h/db"
    assert Secret("a") == Secret("a") and Secret("a") != Secret("b")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("5", 5), (" 5 ", 5), ("+5", 5), (5, 5), ("\u0665", None), ("5.0", None), ("", None),
     ("1_000", None), (True, None), (5.0, None), ("9" * 1_000_000, None), ("-", None)],
)
def test_an_integer_setting_is_ascii_digits_within_its_bounds(
    given: Any, expected: int | None,
) -> None:
    parse = integer(1, 10)
    if expected is None:
        with pytest.raises(ValueError, match="valid integer") as caught:
            parse(given)
        assert len(str(caught.value)) < 100
    else:
        assert parse(given) == expected


def test_the_lambda_entry_imports_no_pydantic() -> None:
    """Its event is checked by hand (decision 0040); the messages are the
    model's (tests/test_lambda.py holds them)."""
    probe = ("import sys, tick.drivers.aws_lambda; "
             "print([m for m in ('pydantic', 'pydantic_core') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("event", "said"),
    [({"max_jobs": 5, "kinds": ["a"], "queues": ["q"], "execution_id": "x"}, None),
     ({"max_jobs": False}, "max_jobs: Input should be a valid integer"),
     ({"max_jobs": -1}, "max_jobs: Input should be greater than 0"),
     ({"kinds": ("a",)}, "kinds: Input should be a valid list"),
     ({"kinds": ["a", None, ""]}, "kinds.1: Input should be a valid string; kinds.2: String "
                                  "should have at least 1 character"),
     ({"scheduled_time": 5}, "scheduled_time: Input should be a valid string"),
     ({"unknown": object()}, None)],
)
def test_an_event_is_checked_key_by_key(event: dict[str, Any], said: str | None) -> None:
    from tick.drivers.lambda_event import parse_event

    if said is None:
        parsed, correlation = parse_event(event)
        assert parsed.max_jobs == event.get("max_jobs")
        assert correlation == event.get("execution_id")
    else:
        with pytest.raises(ValueError) as caught:
            parse_event(event)
        assert str(caught.value) == f"invalid event: {said}"
