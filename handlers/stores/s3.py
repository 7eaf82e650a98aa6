"""`s3://bucket/prefix`: objects in S3 or an S3-compatible service (extra `s3`).

boto3 is imported here only, when an s3:// store is opened. Transport
failures become `StoreError` (a Retry for the handlers); a missing key is
`ObjectMissing`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from tick.errors import missing_extra

from .base import (
    CHUNK_SIZE,
    ContentAddressed,
    ObjectInfo,
    ObjectMissing,
    StoreError,
    check_tenant,
    hex_of,
    is_digest,
)

_MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound"})


def _code(error: Any) -> str:
    """A botocore ClientError's S3 error code ("NoSuchKey", "SlowDown"), or ""."""
    return str(error.response.get("Error", {}).get("Code", ""))


class S3Store(ContentAddressed):
    """Objects at `s3://<bucket>/<prefix>/<tenant>/objects/sha256/<hex>`."""

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        path_style: bool = False,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise missing_extra("an s3:// store", "s3") from None
        self.bucket = bucket
        self.prefix = prefix
        options: dict[str, Any] = {
            "connect_timeout": 5,
            "read_timeout": 30,
            "retries": {"max_attempts": 3, "mode": "standard"},
        }
        if path_style:
            options["s3"] = {"addressing_style": "path"}
        self._client = boto3.client(
            "s3", endpoint_url=endpoint_url, region_name=region, config=Config(**options))

    def _base(self, tenant_id: str) -> str:
        head = f"{self.prefix}/" if self.prefix else ""
        return f"{head}{check_tenant(tenant_id)}/objects/sha256/"

    def _key(self, tenant_id: str, digest: str) -> str:
        return self._base(tenant_id) + hex_of(digest)

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as error:
            code = _code(error)
            if code in _MISSING_CODES:
                raise ObjectMissing(what) from None
            raise StoreError(f"{what}: S3 error {code or 'unknown'}") from None
        except BotoCoreError as error:
            raise StoreError(f"{what}: {type(error).__name__}") from None

    def chunks(self, tenant_id: str, digest: str) -> Generator[bytes, None, None]:
        from botocore.exceptions import BotoCoreError

        key = self._key(tenant_id, digest)
        try:
            reply = self._call(digest, self._client.get_object, Bucket=self.bucket, Key=key)
        except ObjectMissing:
            # Missing to a GET, there to a HEAD: the store is not answering
            # straight (a flap), and "missing" would be a verdict (a scrub
            # degraded the snapshot and GC then deleted the tree's children).
            if self.head(tenant_id, digest) is not None:
                raise StoreError(f"{digest}: a GET answered 404 for an object a HEAD "
                                 "finds") from None
            raise
        body = reply["Body"]
        try:
            yield from body.iter_chunks(CHUNK_SIZE)
        except (BotoCoreError, OSError) as error:
            raise StoreError(f"{digest}: {type(error).__name__}") from None
        finally:
            body.close()  # a reader that stops early frees the connection

    def _write(self, tenant_id: str, digest: str, data: bytes) -> None:
        self._call(digest, self._client.put_object, Bucket=self.bucket,
                   Key=self._key(tenant_id, digest), Body=data)

    def head(self, tenant_id: str, digest: str) -> ObjectInfo | None:
        try:
            reply = self._call(digest, self._client.head_object, Bucket=self.bucket,
                               Key=self._key(tenant_id, digest))
        except ObjectMissing:
            return None
        return ObjectInfo(digest, int(reply["ContentLength"]), reply["LastModified"])

    def delete(self, tenant_id: str, digest: str) -> None:
        self._call(digest, self._client.delete_object, Bucket=self.bucket,
                   Key=self._key(tenant_id, digest))

    def list(self, tenant_id: str) -> Iterator[ObjectInfo]:
        from botocore.exceptions import BotoCoreError, ClientError

        base = self._base(tenant_id)
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=base)
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    digest = "sha256:" + item["Key"][len(base):]
                    if is_digest(digest):
                        yield ObjectInfo(digest, int(item["Size"]), item["LastModified"])
        except ClientError as error:  # its code, as every other call says it
            raise StoreError(f"listing objects: S3 error {_code(error) or 'unknown'}") from None
        except BotoCoreError as error:
            raise StoreError(f"listing objects: {type(error).__name__}") from None
