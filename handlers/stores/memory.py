"""`memory://`: an in-process store, for tests and single-process demos."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from datetime import UTC, datetime

from .base import (
    CHUNK_SIZE,
    ContentAddressed,
    ObjectInfo,
    ObjectMissing,
    check_tenant,
    hex_of,
)


class MemoryStore(ContentAddressed):
    """Objects in a dict, guarded by a lock (handlers run on several threads)."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], tuple[bytes, datetime]] = {}
        self._lock = threading.Lock()

    def get(self, tenant_id: str, digest: str) -> bytes:
        key = (check_tenant(tenant_id), hex_of(digest))
        with self._lock:
            found = self._objects.get(key)
        if found is None:
            raise ObjectMissing(digest)
        return found[0]

    def chunks(self, tenant_id: str, digest: str) -> Generator[bytes, None, None]:
        data = memoryview(self.get(tenant_id, digest))
        for start in range(0, len(data), CHUNK_SIZE):
            yield bytes(data[start:start + CHUNK_SIZE])

    def _write(self, tenant_id: str, digest: str, data: bytes) -> None:
        key = (check_tenant(tenant_id), hex_of(digest))
        with self._lock:
            self._objects[key] = (bytes(data), datetime.now(UTC))

    def head(self, tenant_id: str, digest: str) -> ObjectInfo | None:
        key = (check_tenant(tenant_id), hex_of(digest))
        with self._lock:
            found = self._objects.get(key)
        return None if found is None else ObjectInfo(digest, len(found[0]), found[1])

    def delete(self, tenant_id: str, digest: str) -> None:
        key = (check_tenant(tenant_id), hex_of(digest))
        with self._lock:
            self._objects.pop(key, None)

    def list(self, tenant_id: str) -> Iterator[ObjectInfo]:
        check_tenant(tenant_id)
        with self._lock:
            items = [(k, v) for k, v in self._objects.items() if k[0] == tenant_id]
        for (_, hexd), (data, modified) in sorted(items):
            yield ObjectInfo("sha256:" + hexd, len(data), modified)

    def set_modified(self, tenant_id: str, digest: str, when: datetime) -> None:
        """Backdate an object (tests of GC's grace)."""
        key = (check_tenant(tenant_id), hex_of(digest))
        with self._lock:
            data, _ = self._objects[key]
            self._objects[key] = (data, when)
