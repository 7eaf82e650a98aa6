"""SPEC §2: one settings model; bad values name the variable, never the value."""

from __future__ import annotations

from typing import Any

import pytest

from tick.errors import SettingsError
from tick.settings import load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("AWC_") or name == "DATABASE_URL":
            monkeypatch.delenv(name)


def test_defaults_match_the_spec_table() -> None:
    s = load_settings()
    assert (s.worker_id, s.worker_concurrency, s.worker_lease_secs) == ("awc-worker", 4, 300)
    assert (s.tick_max_jobs, s.tick_max_secs, s.stop_grace_secs) == (100, 55, 30)
    assert (s.migrate, s.prune_after_secs, s.log_format, s.db_prepare) == (
        "auto", 604800, "json", True)
    assert (s.maintenance_interval_secs, s.lambda_margin_secs) == (30, 10)
    assert (s.retention_grace_secs, s.gc_grace_secs, s.gc_batch_size, s.gc_canary_size) == (
        86400, 86400, 1000, 10)
    assert s.gc_dry_run is False and s.metrics_port is None and s.database_url is None
    assert (s.schedule_history_secs, s.tick_history_secs) == (2592000, 604800)  # §15, §16
    assert s.dead_letter_retention_secs is None  # §22: dead letters are kept unless asked


def test_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@h/db")
    monkeypatch.setenv("AWC_WORKER_CONCURRENCY", "16")
    monkeypatch.setenv("AWC_CAS_URL", "s3://bucket/prefix")
    monkeypatch.setenv("AWC_HANDLER_MODULES", "a.b, c ,")
    s = load_settings()
    assert s.worker_concurrency == 16
    assert s.cas_url == "s3://bucket/prefix"
    assert s.handler_module_names == ["a.b", "c"]
    assert s.dsn() == "postgresql://u:p@h/db"


def test_cli_overrides_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWC_TICK_MAX_JOBS", "10")
    assert load_settings(tick_max_jobs=3).tick_max_jobs == 3
    assert load_settings(tick_max_jobs=None).tick_max_jobs == 10


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("AWC_WORKER_CONCURRENCY", "abc", "AWC_WORKER_CONCURRENCY"),
        ("AWC_WORKER_CONCURRENCY", "0", "greater than or equal to 1"),
        ("AWC_WORKER_CONCURRENCY", "257", "less than or equal to 256"),
        ("AWC_WORKER_LEASE_SECS", "0", "AWC_WORKER_LEASE_SECS"),
        ("AWC_METRICS_PORT", "70000", "AWC_METRICS_PORT"),
        ("AWC_METRICS_PORT", "0", "AWC_METRICS_PORT"),
        ("AWC_MIGRATE", "sometimes", "AWC_MIGRATE"),
        ("AWC_GC_DRY_RUN", "yes", "AWC_GC_DRY_RUN"),
        ("AWC_DB_PREPARE", "on", "AWC_DB_PREPARE"),
        ("AWC_CAS_URL", "ftp://host/x", "unknown scheme 'ftp'"),
        ("AWC_LOG_FORMAT", "xml", "AWC_LOG_FORMAT"),
        ("DATABASE_URL", "mysql://root:hunter22@h/db", "DATABASE_URL"),
        ("AWC_METRICS_ADDRESS", "not an address", "AWC_METRICS_ADDRESS"),
        ("AWC_METRICS_ADDRESS", "host\udcffname", "AWC_METRICS_ADDRESS"),
        ("AWC_METRICS_ADDRESS", "0.0.0.0:9090", "AWC_METRICS_ADDRESS"),
    ],
)
def test_bad_values_name_the_setting_not_the_value(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert needle in message
    assert "\n" not in message
    if len(value) > 3:
        assert value not in message


@pytest.mark.parametrize(
    "name", ["AWC_GC_GRACE_SECS", "AWC_RETENTION_GRACE_SECS", "AWC_STOP_GRACE_SECS"]
)
def test_graces_may_be_zero(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "0")
    field = name.removeprefix("AWC_").lower()
    assert getattr(load_settings(), field) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("true", True), ("TRUE", True), ("0", False), ("false", False),
     ("FALSE", False), ("", False)],
)
def test_booleans_accept_exactly_the_spec_spellings(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv("AWC_GC_DRY_RUN", value)
    assert load_settings().gc_dry_run is expected


def test_missing_database_url_is_named() -> None:
    with pytest.raises(SettingsError, match="DATABASE_URL is required"):
        load_settings().dsn()


@pytest.mark.parametrize(
    ("name", "huge"),
    [("AWC_PRUNE_AFTER_SECS", "999999999999"), ("AWC_WORKER_LEASE_SECS", "99999999999"),
     ("AWC_TICK_MAX_SECS", "99999999999"), ("AWC_STOP_GRACE_SECS", "99999999999"),
     ("AWC_MAINTENANCE_INTERVAL_SECS", "99999999999"), ("AWC_GC_GRACE_SECS", "999999999999"),
     ("AWC_RETENTION_GRACE_SECS", "999999999999"), ("AWC_WORKER_POLL_INTERVAL_MS", "9" * 12),
     ("AWC_LAMBDA_MARGIN_SECS", "100000"), ("AWC_TICK_MAX_JOBS", "9" * 12),
     ("AWC_GC_BATCH_SIZE", "9" * 12)],
)
def test_every_duration_and_count_has_an_upper_bound_named_by_its_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, huge: str
) -> None:
    # SPEC §2: "never" is not a number PostgreSQL can add to now().
    monkeypatch.setenv(name, huge)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"invalid setting {name}: ")
    assert "less than or equal to" in str(caught.value)


def test_a_century_of_retention_still_prunes(conn: Any) -> None:
    from tick.maintenance import prune
    from tick.settings import CENTURY

    assert prune(conn, CENTURY, force=True) == 0  # no "timestamp out of range"


@pytest.mark.parametrize("lease", [0, 10**12, float("inf")])
def test_the_python_api_refuses_a_lease_postgresql_cannot_add(conn: Any, lease: float) -> None:
    from tick import tick

    with pytest.raises(ValueError, match="lease_secs"):
        tick(conn, lease_secs=lease)


def test_an_empty_metrics_address_is_the_default_not_every_interface(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Exported but empty, it bound 0.0.0.0; empty means unset for every setting.
    monkeypatch.setenv("AWC_METRICS_ADDRESS", "")
    assert load_settings().metrics_address == "127.0.0.1"
    for address in ("::", "::1", "0.0.0.0", "metrics.internal"):
        monkeypatch.setenv("AWC_METRICS_ADDRESS", address)
        assert load_settings().metrics_address == address
