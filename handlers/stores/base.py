"""The content-addressed object store (SPEC §11): one interface, three backends.

An object's address is `sha256:<64 lowercase hex>` of its bytes, kept at
`<prefix>/<tenant_id>/objects/sha256/<hex>`. `put` always writes, even when
the object exists: a rewrite refreshes its last-modified time, so an object
a producer reuses is young again for GC's grace (SPEC §10.5,
docs/decisions/0004).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

# Matched with fullmatch: `$` would accept a trailing newline (SPEC §11.2).
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Objects are read and hashed this many bytes at a time (SPEC §10).
CHUNK_SIZE = 1 << 20


class StoreError(Exception):
    """A transport failure (unreachable, timed out, throttled): worth a retry."""


class StoreRefused(StoreError):
    """The store will not do this, now or later (a symbolic link where a
    tenant's directory should be): not worth a retry."""


class ObjectRefused(StoreRefused):
    """What sits where one object should be is no object (a symbolic link,
    a FIFO, a directory): that object is not intact, the store is fine."""


class ObjectMissing(Exception):
    """The object is not in the store."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One stored object: its digest, size and last-modified time (UTC)."""

    digest: str
    size: int
    last_modified: datetime


def digest_of(data: bytes) -> str:
    """The address of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: object) -> bool:
    """True for exactly `sha256:` and 64 lowercase hex characters."""
    return isinstance(value, str) and DIGEST.fullmatch(value) is not None


def hex_of(digest: str) -> str:
    """The 64 hex characters of a valid digest; ValueError otherwise."""
    if not is_digest(digest):
        raise ValueError(f"not a sha256 digest: {digest[:80]!r}")
    return digest[7:]


class InvalidTenant(StoreRefused, ValueError):
    """A tenant id no store takes (a path separator, `..`, a newline): never
    worth a retry, so a snapshot of such a tenant gets its Fail at once (it
    was retried until its attempts ran out, and stayed VALIDATING)."""


def check_tenant(tenant_id: str) -> str:
    """A tenant id safe to use as a path segment and key prefix."""
    if not isinstance(tenant_id, str) or TENANT.fullmatch(tenant_id) is None:
        raise InvalidTenant(f"invalid tenant id {str(tenant_id)[:80]!r}")
    return tenant_id


class ObjectStore(Protocol):
    """What every store can do with a tenant's objects."""

    def get(self, tenant_id: str, digest: str) -> bytes:
        """The stored bytes (unverified), whole. `ObjectMissing` if absent."""
        ...

    def chunks(self, tenant_id: str, digest: str) -> Generator[bytes, None, None]:
        """The stored bytes (unverified), `CHUNK_SIZE` at a time, so an object
        of any size is read in bounded memory. `ObjectMissing` if absent
        (raised by the first step)."""
        ...

    def put(self, tenant_id: str, data: bytes) -> str:
        """Store `data` under its digest (always writing); return the digest."""
        ...

    def head(self, tenant_id: str, digest: str) -> ObjectInfo | None:
        """The object's size and age, or None if absent."""
        ...

    def delete(self, tenant_id: str, digest: str) -> None:
        """Delete the object; deleting an absent object is not an error."""
        ...

    def list(self, tenant_id: str) -> Iterator[ObjectInfo]:
        """Every object of the tenant (paginated underneath)."""
        ...



class Tamperable(Protocol):
    """What only tests and the demo do to a store: decay an object, age one.
    Every store implements it (S3's ages only in a test double: S3 has no
    way to set an object's last-modified time)."""

    def put_at(self, tenant_id: str, digest: str, data: bytes) -> None:
        """Write `data` under `digest` as given, unchecked (bit rot)."""
        ...

    def set_modified(self, tenant_id: str, digest: str, when: datetime) -> None:
        """Backdate an object (GC's grace)."""
        ...


class ContentAddressed:
    """`put` and `put_at` for stores that implement `_write`, `get` for
    stores that implement `chunks`: the digest is the address."""

    def _write(self, tenant_id: str, digest: str, data: bytes) -> None:
        raise NotImplementedError

    def put_at(self, tenant_id: str, digest: str, data: bytes) -> None:
        """Write `data` under `digest` as given, unchecked (Tamperable)."""
        self._write(tenant_id, digest, data)

    def chunks(self, tenant_id: str, digest: str) -> Generator[bytes, None, None]:
        raise NotImplementedError

    def get(self, tenant_id: str, digest: str) -> bytes:
        """The stored bytes (unverified), whole. `ObjectMissing` if absent."""
        return b"".join(self.chunks(tenant_id, digest))

    def put(self, tenant_id: str, data: bytes) -> str:
        """Store `data` under its digest (always writing); return the digest."""
        digest = digest_of(data)
        self._write(tenant_id, digest, data)
        return digest
