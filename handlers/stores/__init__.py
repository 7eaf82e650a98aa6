"""The object stores (SPEC §11): one protocol (`base`), three backends
(`memory`, `file`, `s3`). `open_store` here is the only store code that reads
awc's settings; the backends take plain arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tick.errors import SettingsError

from .base import ObjectStore

if TYPE_CHECKING:
    from tick.settings import Settings


def open_store(url: str, settings: Settings | None = None) -> ObjectStore:
    """The store named by `AWC_CAS_URL` (SPEC §11.1)."""
    parts = urlsplit(url)
    if parts.scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if parts.scheme == "file":
        from .file import FileStore

        if parts.netloc not in ("", "localhost"):
            raise SettingsError("AWC_CAS_URL: a file:// URL needs an absolute path (file:///dir)")
        if not parts.path or parts.path == "/":
            raise SettingsError("AWC_CAS_URL: a file:// URL needs a directory (file:///dir)")
        return FileStore(parts.path)
    if parts.scheme == "s3":
        from .s3 import S3Store

        if not parts.netloc:
            raise SettingsError("AWC_CAS_URL: an s3:// URL needs a bucket (s3://bucket/prefix)")
        return S3Store(parts.netloc, parts.path.strip("/"),
                       endpoint_url=settings.s3_endpoint_url if settings else None,
                       region=settings.s3_region if settings else None,
                       path_style=settings.s3_force_path_style if settings else False)
    shown = f"'{parts.scheme}'" if parts.scheme else "missing"
    raise SettingsError(
        f"AWC_CAS_URL: unknown scheme {shown}; use memory://, file:///path or s3://bucket/prefix"
    )
