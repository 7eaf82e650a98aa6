"""`file:///root`: objects as files under a directory, written atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from handlers.store import (
    DIGEST,
    ContentAddressed,
    ObjectInfo,
    ObjectMissing,
    StoreError,
    check_tenant,
    hex_of,
)


class FileStore(ContentAddressed):
    """`<root>/<tenant>/objects/sha256/<hex>`; a reader never sees a partial object."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _dir(self, tenant_id: str) -> Path:
        return self.root / check_tenant(tenant_id) / "objects" / "sha256"

    def _path(self, tenant_id: str, digest: str) -> Path:
        return self._dir(tenant_id) / hex_of(digest)

    def get(self, tenant_id: str, digest: str) -> bytes:
        path = self._path(tenant_id, digest)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(digest) from None
        except OSError as error:
            raise StoreError(f"reading {digest}: {error.strerror or error}") from None

    def put_at(self, tenant_id: str, digest: str, data: bytes) -> None:
        path = self._path(tenant_id, digest)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write a temporary file beside the target, then rename over it:
            # the rename is atomic, so readers see the old object or the new.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as error:
            raise StoreError(f"writing {digest}: {error.strerror or error}") from None

    def head(self, tenant_id: str, digest: str) -> ObjectInfo | None:
        try:
            stat = self._path(tenant_id, digest).stat()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(f"reading {digest}: {error.strerror or error}") from None
        return ObjectInfo(digest, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))

    def delete(self, tenant_id: str, digest: str) -> None:
        try:
            self._path(tenant_id, digest).unlink(missing_ok=True)
        except OSError as error:
            raise StoreError(f"deleting {digest}: {error.strerror or error}") from None

    def list(self, tenant_id: str) -> Iterator[ObjectInfo]:
        folder = self._dir(tenant_id)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except FileNotFoundError:
            return
        except OSError as error:
            raise StoreError(f"listing objects: {error.strerror or error}") from None
        for entry in entries:
            digest = "sha256:" + entry.name
            if not DIGEST.match(digest):
                continue  # temporary files and strangers
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue  # deleted while listing
            yield ObjectInfo(digest, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))

    def set_modified(self, tenant_id: str, digest: str, when: datetime) -> None:
        """Backdate an object (tests of GC's grace)."""
        ts = when.timestamp()
        os.utime(self._path(tenant_id, digest), (ts, ts))
