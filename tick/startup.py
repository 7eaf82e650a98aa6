"""The fixed startup order (SPEC §3): settings, connect, migrate, object
store, handlers, run. Every driver goes through here."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from tick.db import connect
from tick.migrate import migrate, require_current
from tick.registry import import_handler_modules
from tick.settings import Settings

if TYPE_CHECKING:
    import psycopg


def open_database(settings: Settings) -> psycopg.Connection[Any]:
    """Connect and apply (or check) migrations per `AWC_MIGRATE`."""
    conn = connect(settings.dsn(), prepare=settings.db_prepare)
    try:
        migrate(conn, settings.migrate)
    except BaseException:
        conn.close()
        raise
    return conn


def open_operator_database(settings: Settings) -> psycopg.Connection[Any]:
    """Connect for a read-only or operator command: the schema must be
    current and is never changed (SPEC §3); values PostgreSQL holds but
    Python cannot load (an infinite timestamp, jsonb nested too deeply) are
    shown as the server writes them."""
    from tick.loaders import for_operators

    conn = connect(settings.dsn(), prepare=settings.db_prepare)
    try:
        require_current(conn)
    except BaseException:
        conn.close()
        raise
    for_operators(conn)
    return conn


def prepare_handlers(settings: Settings) -> None:
    """Open the object store (`AWC_CAS_URL`, required: a missing one is a
    settings error), then register the built-in kinds and `AWC_HANDLER_MODULES`."""
    import tick.handlers as handlers

    handlers.configure(settings)
    import_handler_modules(settings.handler_module_names)
    # Startup is over: what it allocated (modules, the settings, the registry,
    # the store) lives as long as the process. Frozen, the collector stops
    # walking it on every full collection while jobs churn short-lived
    # objects (a 20,000-job drain: 76 ms of collections become 28 ms).
    gc.freeze()
