"""Settings (SPEC §2): every variable parsed once, by one model.

A bad value is a startup error that names the variable and the problem and
never echoes the value, since a value may be a secret.

The model is plain pydantic; reading the environment is a dozen lines here
(`from_environment`): a variable is the field's name upper-cased behind
`AWC_` (`DATABASE_URL` for the connection string), matched case-insensitively.
pydantic-settings did the same for 90 ms of imports on every cold start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from tick.errors import SettingsError

CAS_SCHEMES = ("memory", "file", "s3")

_TRUE = frozenset({"1", "true", "TRUE"})
_FALSE = frozenset({"0", "false", "FALSE", ""})


def _strict_bool(value: Any) -> Any:
    """Accept exactly the spellings of SPEC §2, nothing pydantic would guess."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    raise ValueError("must be one of 1, true, TRUE, 0, false, FALSE or empty")


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


Flag = Annotated[bool, BeforeValidator(_strict_bool)]
Count = Annotated[int, Field(ge=1, le=COUNT_MAX)]
Port = Annotated[int, Field(ge=1, le=65535)]
# A host name to bind: dot-separated labels of letters, digits and hyphens
# (compiled by `re` on first use: only a loop with metrics reads it).
HOST_NAME = (r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


class Settings(BaseModel):
    """The whole configuration of one awc process."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    database_url: SecretStr | None = Field(default=None, validation_alias="DATABASE_URL")
    # A file holding the connection string, read when DATABASE_URL is unset:
    # systemd's LoadCredential= hands it over this way, with no shell.
    database_url_file: str | None = None
    cas_url: str | None = None
    worker_id: str = Field(default="awc-worker", min_length=1, max_length=200)
    worker_concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    worker_lease_secs: Annotated[int, Field(ge=1, le=WEEK)] = 300
    worker_poll_interval_ms: Annotated[int, Field(ge=1, le=3_600_000)] = 1000
    tick_max_jobs: Count = 100
    tick_max_secs: Annotated[int, Field(ge=1, le=WEEK)] = 55
    stop_grace_secs: Annotated[int, Field(ge=0, le=DAY)] = 30
    migrate: Literal["auto", "check"] = "auto"
    prune_after_secs: Annotated[int, Field(ge=1, le=CENTURY)] = 604800
    metrics_port: Port | None = None
    metrics_address: str = "127.0.0.1"
    metrics_textfile: str | None = None
    pushgateway_url: str | None = None
    log_format: Literal["json", "text"] = "json"
    db_prepare: Flag = True
    handler_modules: str | None = None
    maintenance_interval_secs: Annotated[int, Field(ge=1, le=DAY)] = 30
    lambda_margin_secs: Annotated[int, Field(ge=1, le=900)] = 10
    database_secret_arn: str | None = None
    retention_grace_secs: Annotated[int, Field(ge=0, le=CENTURY)] = 86400
    gc_grace_secs: Annotated[int, Field(ge=0, le=CENTURY)] = 86400
    gc_batch_size: Count = 1000
    gc_canary_size: Count = 10
    gc_dry_run: Flag = False
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_force_path_style: Flag = False
    schedule_history_secs: Annotated[int, Field(ge=1, le=CENTURY)] = 2592000
    tick_history_secs: Annotated[int, Field(ge=1, le=CENTURY)] = 604800
    # SPEC §22: unset, FAILED jobs (dead letters) are never pruned.
    dead_letter_retention_secs: Annotated[int, Field(ge=1, le=CENTURY)] | None = None
    # The console (SPEC §19): closed without a token; a secret like the URL.
    ui_token: SecretStr | None = None
    ui_read_only: Flag = False

    @field_validator(
        "metrics_port", "metrics_textfile", "pushgateway_url", "handler_modules",
        "database_url_file",
        "database_secret_arn", "s3_endpoint_url", "s3_region", "cas_url", "ui_token",
        "dead_letter_retention_secs", mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # An exported-but-empty variable (VAR=) means "unset", as shells intend.
        return None if value == "" else value

    @field_validator("ui_token", mode="after")
    @classmethod
    def _check_ui_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        text = value.get_secret_value()
        if len(text) < UI_TOKEN_MIN:
            raise ValueError(f"must be at least {UI_TOKEN_MIN} characters")
        if len(text) > UI_TOKEN_MAX or not text.isprintable() or text != text.strip():
            raise ValueError(f"must be at most {UI_TOKEN_MAX} printable characters, "
                             "with no surrounding space")
        return value

    @field_validator("database_url", mode="before")
    @classmethod
    def _check_database_url(cls, value: Any) -> Any:
        # Blank or whitespace is unset, never libpq's default target (SPEC §3);
        # a string libpq would misread is refused without quoting it.
        from tick.db import dsn_problem

        if value is None:
            return None
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        text = text.strip()
        if not text:
            return None
        problem = dsn_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    @field_validator("metrics_address", mode="before")
    @classmethod
    def _check_metrics_address(cls, value: Any) -> Any:
        # Exported but empty: the default (it bound every interface), like
        # every other setting. Else an IP address, v4 or v6, or a host name.
        if value == "":
            from pydantic_core import PydanticUseDefault

            raise PydanticUseDefault
        if not isinstance(value, str):
            return value
        import ipaddress
        import re

        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not re.fullmatch(HOST_NAME, value):
                raise ValueError("must be an IP address (such as 127.0.0.1, 0.0.0.0 or ::) "
                                 "or a host name") from None
        return value

    @field_validator("cas_url")
    @classmethod
    def _check_cas_scheme(cls, value: str | None) -> str | None:
        if value is None:
            return None
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
        return value

    @field_validator("pushgateway_url")
    @classmethod
    def _check_pushgateway_url(cls, value: str | None) -> str | None:
        # Like prometheus-client, a bare host:port means http://. A
        # user:password@ is sent as HTTP basic auth (tick.export.push).
        if value is None:
            return None
        url = value if "://" in value else f"http://{value}"
        problem = url_problem(url, ("http", "https"))
        if problem is not None:
            raise ValueError(problem)
        return url

    @field_validator("s3_endpoint_url")
    @classmethod
    def _check_s3_endpoint_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        problem = url_problem(value, ("http", "https"))
        if problem is not None:
            raise ValueError(problem)
        if urlsplit(value).username is not None:
            raise ValueError("holds user information; S3 takes its credentials from the "
                             "environment or a role, never from the URL")
        return value

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


def _variable_name(field: str) -> str:
    if field == "database_url":
        return "DATABASE_URL"
    return "AWC_" + field.upper()


def describe(error: ValidationError) -> str:
    """One line naming each bad variable and its problem, never its value."""
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        loc = item.get("loc") or ("?",)
        field = str(loc[0])
        name = field if field.isupper() else _variable_name(field)
        message = item.get("msg", "invalid value")
        message = message.removeprefix("Value error, ")
        problems.append(f"{name}: {message}")
    return "invalid setting " + "; ".join(problems)


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that name a setting, by field name: `AWC_<FIELD>` (and
    `DATABASE_URL`), whatever their case; the rest are ignored."""
    import os

    wanted = {_variable_name(name).lower(): name for name in Settings.model_fields}
    found = {}
    for key, value in (os.environ if environ is None else environ).items():
        field = wanted.get(key.lower())
        if field is not None:
            found[field] = value
    return found


def load_settings(**overrides: Any) -> Settings:
    """Read the environment once; CLI flags arrive as `overrides` and win."""
    from tick.redaction import keep_secret, url_secrets

    clean = {key: value for key, value in overrides.items() if value is not None}
    given = {**from_environment(), **clean}
    # Kept before validation, so that no error path of a bad value can quote them.
    for field in ("database_url", "cas_url", "pushgateway_url", "s3_endpoint_url"):
        value = given.get(field)
        keep_secret(*url_secrets(value.get_secret_value() if isinstance(value, SecretStr)
                                 else str(value or "")))
    try:
        settings = Settings(**given)
    except ValidationError as error:
        raise SettingsError(describe(error)) from None
    keep_secret(*settings.secrets())
    return settings
