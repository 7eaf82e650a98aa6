"""The Lambda's database secret (SPEC §3, §8): the connection string comes
from `DATABASE_URL`, or from the Secrets Manager secret named by
`AWC_DATABASE_SECRET_ARN`, which holds a URL or RDS's JSON.

boto3 is imported (by powertools) only when the secret is read.
"""

from __future__ import annotations

import json
from typing import Any

from tick.errors import SettingsError
from tick.redaction import keep_secret
from tick.settings import Settings


def database_url(settings: Settings) -> str:
    """DATABASE_URL, or the Secrets Manager secret (a URL or RDS's JSON)."""
    if settings.database_secret_arn is None:
        return settings.dsn()
    from aws_lambda_powertools.utilities import parameters

    try:
        value = parameters.get_secret(settings.database_secret_arn, max_age=300)
    except Exception as error:
        raise SettingsError(
            f"AWC_DATABASE_SECRET_ARN: cannot read the secret ({type(error).__name__})"
        ) from None
    try:
        text = value.decode() if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError:
        raise SettingsError("AWC_DATABASE_SECRET_ARN: the secret is not UTF-8 text") from None
    return secret_dsn(text)


SECRET = "AWC_DATABASE_SECRET_ARN"


def secret_dsn(text: str) -> str:
    """The connection string a secret's text holds: a URL, or the RDS JSON
    (`host`, `port`, `username`, `password`, `dbname`), once JSON-encoded or
    twice. Anything else is a `SettingsError` naming the secret that quotes
    nothing of it (SPEC §3, §8)."""
    from psycopg.conninfo import make_conninfo

    from tick.db import check_dsn

    body = text.strip()
    if not body:
        raise SettingsError(f"{SECRET}: the secret is empty")
    if body[0] in '{["':
        try:
            doc: Any = json.loads(body)
            if isinstance(doc, str):  # JSON encoded twice, as some tooling writes it
                doc = json.loads(doc) if doc.strip()[:1] == "{" else doc
        except (ValueError, RecursionError):
            raise SettingsError(f"{SECRET}: the secret is not valid JSON") from None
        if isinstance(doc, str):
            return check_dsn(doc, SECRET)
        if not isinstance(doc, dict):
            raise SettingsError(f"{SECRET}: the secret is JSON but not an object")
        host, user, password = doc.get("host"), doc.get("username"), doc.get("password")
        if not all(isinstance(v, str) and v for v in (host, user, password)):
            raise SettingsError(
                f"{SECRET}: the secret's JSON lacks host, username or password as text"
            )
        port, dbname = doc.get("port", 5432), doc.get("dbname", "postgres")
        if (
            isinstance(port, bool)
            or not isinstance(port, int | str)
            or not str(port).isdigit()
            or not isinstance(dbname, str)
        ):
            raise SettingsError(f"{SECRET}: the secret's port or dbname is not valid")
        keep_secret(password)  # redacted from every error from now on (SPEC §3)
        return make_conninfo(host=host, port=str(port), user=user, password=password, dbname=dbname)
    return check_dsn(body, SECRET)
