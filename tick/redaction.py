"""Secrets kept out of every line awc prints or records (SPEC §2, §3).

Every URL-valued setting can carry a secret (`user:password@`), and so can
the console's token. Their values are validated so that no library is handed
a URL it would quote back; as a second line of defence, `load_settings`
hands each secret here, and every `awc:` line, recorded tick error and
re-raised Lambda error goes through `redacted`, which replaces them with
`***` whatever library message quoted them, and however it cut the URL.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]*)(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)

# Shorter fragments are not replaced: "***" for every "ab" in a message
# would make it unreadable, and so short a password protects nothing.
SECRET_MIN = 3

_KEPT: set[str] = set()


def url_secrets(url: str) -> list[str]:
    """The password of a URL's `user:password@`, as written and decoded, and
    its whole user information; parsed by hand, since a URL that urllib
    refuses must be redacted too. A user name alone is no secret (and
    `postgres` replaced in every message would help nobody)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    userinfo, at, _ = rest.rpartition("@")
    _, colon, password = userinfo.partition(":")
    if not at or not colon or not password:
        return []
    return [userinfo, unquote(userinfo), password, unquote(password)]


def dsn_secrets(dsn: str) -> list[str]:
    """The password a connection string carries, in the forms a message
    could quote it; read without libpq, so that a string libpq refuses is
    covered too."""
    if "://" in dsn:
        return url_secrets(dsn)
    return [match.group(2).strip("'") for match in _KV_PASSWORD.finditer(dsn)]


def redact(text: str) -> str:
    """`text` with any connection-string password replaced by `***`."""
    text = _URL_PASSWORD.sub(r"\1***\3", text)
    return _KV_PASSWORD.sub(r"\1***", text)


def keep_secret(*values: str | None) -> None:
    """Redact these values from now on."""
    _KEPT.update(v for v in values if v and len(v) >= SECRET_MIN)


def redacted(text: str) -> str:
    """`text` with every kept secret, and any connection-string password,
    replaced by `***`."""
    for secret in sorted((s for s in _KEPT if s in text), key=len, reverse=True):
        text = text.replace(secret, "***")
    return redact(text)


def redacted_head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, redacted before the cut, so a
    password the cut would split is still whole to the redaction (a message
    quoting a URL, cut inside its password, kept part of it). Only the head
    is read: a message may be megabytes."""
    return redacted(text[:limit * 4])[:limit]
