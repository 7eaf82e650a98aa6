"""SPEC §11: one contract, three stores (memory, file, S3 over HTTP to moto)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tick.handlers.stores import open_store
from tick.handlers.stores.base import ObjectMissing, StoreError, digest_of
from tick.handlers.trees import encode_tree, parse_tree, walk_closure, write_directory, write_tree

from tests.support import MotoS3, new_bucket, s3_settings
from tick.errors import SettingsError


def test_put_get_head_delete(store: Any) -> None:
    digest = store.put("t1", b"hello")
    assert digest == "sha256:" + "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert store.get("t1", digest) == b"hello"
    info = store.head("t1", digest)
    assert info.size == 5 and info.digest == digest
    assert abs((datetime.now(UTC) - info.last_modified).total_seconds()) < 60
    store.delete("t1", digest)
    assert store.head("t1", digest) is None
    with pytest.raises(ObjectMissing):
        store.get("t1", digest)
    store.delete("t1", digest)  # deleting twice is fine


def test_tenants_are_isolated(store: Any) -> None:
    a = store.put("tenant-a", b"only a")
    store.put("tenant-b", b"only b")
    assert [o.digest for o in store.list("tenant-a")] == [a]
    with pytest.raises(ObjectMissing):
        store.get("tenant-b", a)
    assert list(store.list("nobody")) == []


def test_list_returns_every_object_with_size(store: Any) -> None:
    made = {store.put("t1", f"object {n}".encode()) for n in range(25)}
    listed = list(store.list("t1"))
    assert {o.digest for o in listed} == made
    assert all(o.size == len(store.get("t1", o.digest)) for o in listed)


def test_put_rewrites_and_refreshes_age(store: Any) -> None:
    digest = store.put("t1", b"again")
    store.set_modified("t1", digest, datetime.now(UTC) - timedelta(days=3))
    first = store.head("t1", digest).last_modified
    store.put("t1", b"again")
    assert store.head("t1", digest).last_modified > first


def test_bad_tenant_and_digest_are_refused(store: Any) -> None:
    with pytest.raises(ValueError):
        store.put("../etc", b"x")
    with pytest.raises(ValueError):
        store.get("t1", "sha256:XYZ")
    with pytest.raises(ValueError):
        store.get("t1", "md5:" + "0" * 32)


def test_trees_are_canonical_and_walkable(store: Any) -> None:
    root = write_tree(store, "t1", {"b.txt": "B", "a": {"c.txt": b"C"}})
    data = store.get("t1", root)
    assert data == encode_tree(parse_tree_entries(data))
    assert data.startswith(b'{"entries":[{"digest":"sha256:') and b" " not in data
    walk = walk_closure(store, "t1", root)
    assert walk.verdict() == {"closed": True, "objects": 4, "missing_count": 0,
                              "corrupt_count": 0, "missing": [], "corrupt": []}


def parse_tree_entries(data: bytes) -> list[dict[str, str]]:
    import json

    return list(json.loads(data)["entries"])


def test_walk_reports_missing_and_corrupt(store: Any) -> None:
    root = write_tree(store, "t1", {"gone": "lost", "rot": "fine", "ok": "ok"})
    store.delete("t1", digest_of(b"lost"))
    store.put_at("t1", digest_of(b"fine"), b"rotten")
    verdict = walk_closure(store, "t1", root).verdict()
    assert verdict["closed"] is False
    assert verdict["missing"] == [digest_of(b"lost")]
    assert verdict["corrupt"] == [digest_of(b"fine")]
    assert verdict["objects"] == 4


def test_a_tree_that_does_not_parse_is_corrupt(store: Any) -> None:
    bogus = store.put("t1", b'{"entries": "no"}')
    root = store.put("t1", encode_tree([{"name": "x", "digest": bogus, "type": "tree"}]))
    assert walk_closure(store, "t1", root).verdict()["corrupt"] == [bogus]
    with pytest.raises(ValueError):
        parse_tree(b"not json")


def test_write_directory(store: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.bin").write_bytes(b"\x00\x01")
    root = write_directory(store, "t1", src)
    assert root == write_tree(store, "t1", {"a.txt": "A", "sub": {"b.bin": b"\x00\x01"}})


def test_file_store_layout_and_atomic_writes(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    digest = store.put("t1", b"payload")
    path = tmp_path / "t1" / "objects" / "sha256" / digest[7:]
    assert path.read_bytes() == b"payload"
    # A writer's temporary file is never listed as an object.
    (path.parent / ".tmp-abc").write_bytes(b"partial")
    assert [o.digest for o in store.list("t1")] == [digest]
    assert not [p for p in os.listdir(path.parent) if p.startswith(".tmp-") and p != ".tmp-abc"]


def test_s3_key_layout_and_pagination(moto_s3: MotoS3) -> None:
    import boto3

    bucket = new_bucket(moto_s3)
    settings = s3_settings(moto_s3, bucket)
    store = open_store(settings.cas_url or "", settings)
    digest = store.put("t1", b"payload")
    client = boto3.client("s3", endpoint_url=moto_s3.endpoint, region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [f"awc/t1/objects/sha256/{digest[7:]}"]
    for n in range(1010):  # more than one page of 1000
        client.put_object(Bucket=bucket, Key=f"awc/t1/objects/sha256/{n:064x}", Body=b"")
    assert len(list(store.list("t1"))) == 1011


def test_s3_transport_failure_is_a_store_error(moto_s3: MotoS3) -> None:
    settings = s3_settings(moto_s3, "any-bucket", s3_endpoint_url="http://127.0.0.1:1")
    store = open_store(settings.cas_url or "", settings)
    with pytest.raises(StoreError):
        store.get("t1", digest_of(b"x"))
    with pytest.raises(StoreError):
        list(store.list("t1"))


@pytest.mark.parametrize("url", ["ftp://x/y", "gs://bucket", "nothing"])
def test_unknown_scheme_is_a_settings_error(url: str) -> None:
    with pytest.raises(SettingsError, match="unknown scheme"):
        open_store(url)


def test_a_failed_listing_says_the_s3_error_code(moto_s3: MotoS3) -> None:
    """Every S3 call said its error code but the listing ("listing objects:
    ClientError"): an operator could not tell a missing bucket from a
    throttle."""
    from tests.support import moto_store

    store = moto_store(moto_s3, "no-such-bucket-here")
    with pytest.raises(StoreError, match="listing objects: S3 error NoSuchBucket"):
        list(store.list("acme"))


def test_a_get_answering_404_for_an_object_a_head_finds_is_an_outage(moto_s3: MotoS3) -> None:
    """S3 answering 404 to a GET for a moment (HEAD and LIST still showing
    the object): taken for a missing object, a scrub degraded its snapshot
    and GC then deleted the children of the tree it could not read. A GET
    and a HEAD that disagree are an outage; a real miss is still a miss."""
    from botocore.exceptions import ClientError

    from tests.support import moto_store

    store = moto_store(moto_s3, new_bucket(moto_s3))
    digest = store.put("acme", b"there all along")

    def flapping(**kwargs: Any) -> Any:  # the fault, as the transport would answer it
        raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")

    store._client.get_object = flapping
    with pytest.raises(StoreError, match="answered 404 for an object a HEAD finds"):
        b"".join(store.chunks("acme", digest))
    with pytest.raises(ObjectMissing):
        b"".join(store.chunks("acme", digest_of(b"never written")))
