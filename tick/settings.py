"""Settings (SPEC §2): every variable parsed once, by one declaration.

A bad value is a startup error that names the variable and the problem and
never echoes the value, since a value may be a secret.

Each setting is a field of `Settings` with its default and its parser
(`tick.setting_values`); reading the environment is a dozen lines here
(`from_environment`): a variable is the field's name upper-cased behind
`AWC_` (`DATABASE_URL` for the connection string), matched
case-insensitively. The declaration is plain Python, not a pydantic model:
building the model's validator cost every cold `awc tick` 85 ms, a third of
its start (decision 0040).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import urlsplit

from tick.errors import SettingsError
from tick.setting_values import Parser, Secret, choice, flag, integer, secret, text

CAS_SCHEMES = ("memory", "file", "s3")

# Every number has an upper bound (SPEC §2): past these a lease, interval or
# retention is no longer a time PostgreSQL can add to now(), or a count no
# real deployment means. A century stands for "never" where a grace is asked.
WEEK = 7 * 86400
DAY = 86400
CENTURY = 100 * 365 * 86400
COUNT_MAX = 10_000_000
MAX_CONCURRENCY = 256  # slots of one process

UI_TOKEN_MIN = 16
UI_TOKEN_MAX = 1024


def url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    """What is wrong with a URL-valued setting, quoting nothing of it (the
    URL may carry a password), or None. A URL urllib cannot read (a bad port,
    a broken IPv6 host) is refused here: handed on, a library quotes it back
    in its error, user information and all (SPEC §3)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not 0-65535
    except ValueError:
        return ("is not a valid URL (check the host and the port; percent-encode "
                "'@', ':', '/' in a user or password)")
    if parts.scheme not in schemes:
        return "must be an " + " or ".join(f"{s}://" for s in schemes) + " URL"
    if not parts.hostname:
        return "has no host"
    return None


def without_credentials(url: str) -> tuple[str, str | None, str | None]:
    """A (validated) URL without its `user:password@`, and the user and the
    password, percent-decoded."""
    from urllib.parse import unquote, urlunsplit

    parts = urlsplit(url)
    if parts.username is None:
        return url, None, None
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    return (urlunsplit(bare), unquote(parts.username),
            unquote(parts.password) if parts.password is not None else None)


# A host name to bind: dot-separated labels of letters, digits and hyphens
# (compiled by `re` on first use: only a loop with metrics reads it).
HOST_NAME = (r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


def _database_url(value: str) -> str | None:
    # Blank or whitespace is unset, never libpq's default target (SPEC §3);
    # a string libpq would misread is refused without quoting it.
    from tick.db import dsn_problem

    dsn = value.strip()
    if not dsn:
        return None
    problem = dsn_problem(dsn)
    if problem is not None:
        raise ValueError(problem)
    return dsn


def _ui_token(value: str) -> str:
    if len(value) < UI_TOKEN_MIN:
        raise ValueError(f"must be at least {UI_TOKEN_MIN} characters")
    if len(value) > UI_TOKEN_MAX or not value.isprintable() or value != value.strip():
        raise ValueError(f"must be at most {UI_TOKEN_MAX} printable characters, "
                         "with no surrounding space")
    return value


def _metrics_address(value: Any) -> str:
    # An IP address, v4 or v6, or a host name.
    import ipaddress
    import re

    value = text()(value)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not re.fullmatch(HOST_NAME, value):
            raise ValueError("must be an IP address (such as 127.0.0.1, 0.0.0.0 or ::) "
                             "or a host name") from None
    return str(value)


def _cas_url(value: Any) -> str:
    value = text()(value)
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("is not a valid URL") from None
    scheme = parts.scheme
    if scheme not in CAS_SCHEMES:
        # Quoted only when it is one: in "user:password@bucket" urllib
        # reads the user name as the scheme.
        shown = (f"'{scheme}'" if scheme and value.lower().startswith(f"{scheme}://")
                 else "missing")
        raise ValueError(
            f"unknown scheme {shown}; use memory://, file:///path or s3://bucket/prefix"
        )
    if "@" in parts.netloc:
        raise ValueError("holds user information; S3 takes its credentials from the "
                         "environment or a role, never from the URL")
    return str(value)


def _pushgateway_url(value: Any) -> str:
    # Like prometheus-client, a bare host:port means http://. A
    # user:password@ is sent as HTTP basic auth (tick.export.push).
    value = text()(value)
    url = value if "://" in value else f"http://{value}"
    problem = url_problem(url, ("http", "https"))
    if problem is not None:
        raise ValueError(problem)
    return url


def _s3_endpoint_url(value: Any) -> str:
    value = text()(value)
    problem = url_problem(value, ("http", "https"))
    if problem is not None:
        raise ValueError(problem)
    if urlsplit(value).username is not None:
        raise ValueError("holds user information; S3 takes its credentials from the "
                         "environment or a role, never from the URL")
    return str(value)


def setting(default: Any, parse: Parser, *, empty_is_unset: bool | None = None) -> Any:
    """A field of `Settings`: its default, and the parser of a value given.
    An exported-but-empty variable (`VAR=`) means unset, as shells intend,
    for every optional setting (and where `empty_is_unset` says so); for
    the others the parser reads it (a flag: false; a number: refused)."""
    unset = default is None if empty_is_unset is None else empty_is_unset
    return field(default=default, metadata={"parse": parse, "empty_is_unset": unset})


@dataclass(frozen=True, repr=False)
class Settings:
    """The whole configuration of one awc process. Built from keyword
    arguments (strings as the environment gives them, or typed values),
    each checked by its field's parser; every bad one is named in one
    `SettingsError`."""

    database_url: Secret | None = setting(None, secret(_database_url))
    # A file holding the connection string, read when DATABASE_URL is unset:
    # systemd's LoadCredential= hands it over this way, with no shell.
    database_url_file: str | None = setting(None, text())
    cas_url: str | None = setting(None, _cas_url)
    worker_id: str = setting("awc-worker", text(1, 200))
    worker_concurrency: int = setting(4, integer(1, MAX_CONCURRENCY))
    worker_lease_secs: int = setting(300, integer(1, WEEK))
    worker_poll_interval_ms: int = setting(1000, integer(1, 3_600_000))
    tick_max_jobs: int = setting(100, integer(1, COUNT_MAX))
    tick_max_secs: int = setting(55, integer(1, WEEK))
    stop_grace_secs: int = setting(30, integer(0, DAY))
    migrate: Literal["auto", "check"] = setting("auto", choice("auto", "check"))
    prune_after_secs: int = setting(604800, integer(1, CENTURY))
    metrics_port: int | None = setting(None, integer(1, 65535))
    # Exported but empty, it bound every interface: now the default.
    metrics_address: str = setting("127.0.0.1", _metrics_address, empty_is_unset=True)
    metrics_textfile: str | None = setting(None, text())
    pushgateway_url: str | None = setting(None, _pushgateway_url)
    log_format: Literal["json", "text"] = setting("json", choice("json", "text"))
    db_prepare: bool = setting(True, flag)
    handler_modules: str | None = setting(None, text())
    maintenance_interval_secs: int = setting(30, integer(1, DAY))
    lambda_margin_secs: int = setting(10, integer(1, 900))
    database_secret_arn: str | None = setting(None, text())
    retention_grace_secs: int = setting(86400, integer(0, CENTURY))
    gc_grace_secs: int = setting(86400, integer(0, CENTURY))
    gc_batch_size: int = setting(1000, integer(1, COUNT_MAX))
    gc_canary_size: int = setting(10, integer(1, COUNT_MAX))
    gc_dry_run: bool = setting(False, flag)
    s3_endpoint_url: str | None = setting(None, _s3_endpoint_url)
    s3_region: str | None = setting(None, text())
    s3_force_path_style: bool = setting(False, flag)
    schedule_history_secs: int = setting(2592000, integer(1, CENTURY))
    tick_history_secs: int = setting(604800, integer(1, CENTURY))
    # SPEC §22: unset, FAILED jobs (dead letters) are never pruned.
    dead_letter_retention_secs: int | None = setting(None, integer(1, CENTURY))
    # The console (SPEC §19): closed without a token; a secret like the URL.
    ui_token: Secret | None = setting(None, secret(_ui_token))
    ui_read_only: bool = setting(False, flag)

    def __post_init__(self) -> None:
        problems = []
        for item in fields(self):
            given = getattr(self, item.name)
            if given is item.default:
                continue
            if given is None or (given == "" and item.metadata["empty_is_unset"]):
                value = item.default
            else:
                try:
                    value = item.metadata["parse"](given)
                except ValueError as error:
                    problems.append(f"{variable_name(item.name)}: {error}")
                    continue
            object.__setattr__(self, item.name, value)
        if problems:
            raise SettingsError("invalid setting " + "; ".join(problems))

    def secrets(self) -> list[str]:
        """What must never be printed: the user information of every
        URL-valued setting, the database password, the console's token."""
        from tick.redaction import dsn_secrets, url_secrets

        found = [] if self.database_url is None else dsn_secrets(
            self.database_url.get_secret_value())
        for url in (self.cas_url, self.pushgateway_url, self.s3_endpoint_url):
            found.extend(url_secrets(url or ""))
        if self.ui_token is not None:
            found.append(self.ui_token.get_secret_value())
        return found

    @property
    def handler_module_names(self) -> list[str]:
        """`AWC_HANDLER_MODULES` split on commas, blanks dropped."""
        if not self.handler_modules:
            return []
        return [name.strip() for name in self.handler_modules.split(",") if name.strip()]

    def dsn(self) -> str:
        """The connection string; a clear error when it is required but unset."""
        if self.database_url is not None:
            return self.database_url.get_secret_value()
        if self.database_url_file is not None:
            from tick.db import check_dsn

            try:
                with open(self.database_url_file, encoding="utf-8") as source:
                    text = source.read().strip()
            except (OSError, UnicodeDecodeError) as error:
                why = getattr(error, "strerror", None) or "not UTF-8 text"
                raise SettingsError(f"AWC_DATABASE_URL_FILE: cannot read the file ({why})"
                                    ) from None
            if not text:
                raise SettingsError("AWC_DATABASE_URL_FILE: the file is empty")
            return check_dsn(text, "AWC_DATABASE_URL_FILE")
        raise SettingsError("DATABASE_URL is required but not set")

    def require_ui_token(self) -> str:
        """`AWC_UI_TOKEN`, without which the console does not start."""
        if self.ui_token is None:
            raise SettingsError("AWC_UI_TOKEN is required by awc ui (at least "
                                f"{UI_TOKEN_MIN} characters); the console is closed without it")
        return self.ui_token.get_secret_value()

    def require_cas_url(self) -> str:
        """`AWC_CAS_URL`, required by the commands that run jobs."""
        if self.cas_url is None:
            raise SettingsError("AWC_CAS_URL is required but not set")
        return self.cas_url


def variable_name(field: str) -> str:
    """The environment variable of a field."""
    if field == "database_url":
        return "DATABASE_URL"
    return "AWC_" + field.upper()


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that name a setting, by field name: `AWC_<FIELD>` (and
    `DATABASE_URL`), whatever their case; the rest are ignored."""
    import os

    wanted = {variable_name(item.name).lower(): item.name for item in fields(Settings)}
    found = {}
    for key, value in (os.environ if environ is None else environ).items():
        name = wanted.get(key.lower())
        if name is not None:
            found[name] = value
    return found


def load_settings(**overrides: Any) -> Settings:
    """Read the environment once; CLI flags arrive as `overrides` and win."""
    from tick.redaction import keep_secret, url_secrets
    from tick.setting_values import revealed

    clean = {key: value for key, value in overrides.items() if value is not None}
    given = {**from_environment(), **clean}
    # Kept before validation, so that no error path of a bad value can quote them.
    for name in ("database_url", "cas_url", "pushgateway_url", "s3_endpoint_url"):
        value = given.get(name)
        keep_secret(*url_secrets(revealed(value) if value is not None else ""))
    settings = Settings(**given)
    keep_secret(*settings.secrets())
    return settings
