"""`file:///root`: objects as files under a directory, written atomically.

Nothing below the root is reached through a symbolic link (SPEC §11.2): each
directory on the way to an object (`<tenant>/objects/sha256`) is opened with
`O_NOFOLLOW` relative to the one before it, and every file operation is made
relative to that final directory. A tenant directory that links to another
tenant's cannot turn one tenant's GC into a deletion of the other's objects:
the link is refused. The root itself may be a link (the operator chose it).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Generator, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from .base import (
    CHUNK_SIZE,
    ContentAddressed,
    ObjectInfo,
    ObjectMissing,
    ObjectRefused,
    StoreError,
    StoreRefused,
    check_tenant,
    hex_of,
    is_digest,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FileStore(ContentAddressed):
    """`<root>/<tenant>/objects/sha256/<hex>`; a reader never sees a partial object."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @contextmanager
    def _objects_dir(self, tenant_id: str, *, create: bool = False) -> Iterator[int]:
        """A descriptor of the tenant's object directory, reached without
        following a link; `FileNotFoundError` if it does not exist."""
        steps = (check_tenant(tenant_id), "objects", "sha256")
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            # The root gone (a volume not mounted, a link whose target went)
            # is an outage: read as missing objects, it failed every
            # snapshot validated and degraded every one scrubbed meanwhile.
            raise StoreError(f"the store's directory {self.root} does not exist (a volume "
                             "not mounted?)") from None
        try:
            for name in steps:
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=fd)
                try:
                    inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as error:
                    if error.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise StoreRefused(
                            f"{'/'.join(steps[:steps.index(name) + 1])} in the store is a "
                            "symbolic link or not a directory; refused") from None
                    raise
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    def chunks(self, tenant_id: str, digest: str) -> Generator[bytes, None, None]:
        name = hex_of(digest)
        try:
            with ExitStack() as stack:
                try:
                    folder = stack.enter_context(self._objects_dir(tenant_id))
                except FileNotFoundError:
                    # The tenant's directory gone under a root still there (a
                    # volume not mounted on its mount point): no object of a
                    # registered snapshot can be read: an outage, not a verdict.
                    raise StoreError(f"the tenant's directory in the store is missing "
                                     f"(reading {digest}; a volume not mounted?)") from None
                # Non-blocking, then only a regular file is read: opening a
                # FIFO there blocked its thread for good (and held a pooled
                # connection), a device never ended.
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                             dir_fd=folder)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise ObjectRefused(f"{digest} is not a regular file; refused")
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as source:
                while chunk := source.read(CHUNK_SIZE):
                    yield chunk
        except FileNotFoundError:
            raise ObjectMissing(digest) from None
        except StoreError:
            raise
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ObjectRefused(f"{digest} is a symbolic link; refused") from None
            raise StoreError(f"reading {digest}: {error.strerror or error}") from None

    def _write(self, tenant_id: str, digest: str, data: bytes) -> None:
        name = hex_of(digest)
        try:
            with self._objects_dir(tenant_id, create=True) as folder:
                # Write a temporary file beside the target, then rename over it:
                # the rename is atomic, so readers see the old object or the new.
                tmp = f".tmp-{secrets.token_hex(8)}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=folder)
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(data)
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
                except BaseException:
                    with suppress(OSError):
                        os.unlink(tmp, dir_fd=folder)
                    raise
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"writing {digest}: {error.strerror or error}") from None

    def head(self, tenant_id: str, digest: str) -> ObjectInfo | None:
        name = hex_of(digest)
        try:
            with self._objects_dir(tenant_id) as folder:
                found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"reading {digest}: {error.strerror or error}") from None
        return ObjectInfo(digest, found.st_size, datetime.fromtimestamp(found.st_mtime, UTC))

    def delete(self, tenant_id: str, digest: str) -> None:
        name = hex_of(digest)
        try:
            with self._objects_dir(tenant_id) as folder:
                os.unlink(name, dir_fd=folder)  # unlink never follows a link
        except FileNotFoundError:
            return
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"deleting {digest}: {error.strerror or error}") from None

    def list(self, tenant_id: str) -> Iterator[ObjectInfo]:
        try:
            with self._objects_dir(tenant_id) as folder, os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
                infos = []
                for entry in entries:
                    digest = "sha256:" + entry.name
                    if not is_digest(digest):
                        continue  # temporary files and strangers
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted while listing
                    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                        infos.append(ObjectInfo(digest, info.st_size,
                                                datetime.fromtimestamp(info.st_mtime, UTC)))
        except FileNotFoundError:
            return
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(f"listing objects: {error.strerror or error}") from None
        yield from infos

    def set_modified(self, tenant_id: str, digest: str, when: datetime) -> None:
        """Backdate an object (tests of GC's grace)."""
        ts = when.timestamp()
        with self._objects_dir(tenant_id) as folder:
            os.utime(hex_of(digest), (ts, ts), dir_fd=folder, follow_symlinks=False)

