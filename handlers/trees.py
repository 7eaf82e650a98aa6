"""Trees and closures (SPEC §10, §11.2), and the producer side: writing trees.

A tree is the UTF-8 JSON `{"entries": [{"name", "digest", "type"}, ...]}`
with entries sorted by name, written with sorted keys and no spaces. It is
valid only in exactly those canonical bytes: no duplicate keys, no extra
fields, no NaN, and entry names that are unique, non-empty, hold no `/` or
NUL and are not `.` or `..`. The entry that references an object says
whether it is a blob or a tree. A snapshot's closure is every object
reachable from its root tree.

The walk is iterative (no recursion limit) and visits each object once per
(digest, type): bytes referenced as a blob in one place and as a tree in
another are also read as a tree, so a child reachable only through that tree
is never missed (SPEC §10). Blobs are hashed in chunks, never held whole;
a walk that only marks (GC) never reads a blob at all.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .stores.base import ObjectMissing, ObjectRefused, ObjectStore, digest_of, is_digest

VERDICT_LIST_LIMIT = 50
# A tree is read whole to be parsed: past this size it is corrupt, whatever
# it says (a directory of ~500,000 entries).
MAX_TREE_BYTES = 64 << 20
ENTRY_KEYS = ("digest", "name", "type")

# A dict tree for `write_tree`: names map to bytes (blobs) or nested dicts.
TreeSpec = Mapping[str, "bytes | str | TreeSpec"]


class CorruptTree(ValueError):
    """Bytes that should be a tree are not a canonical tree."""


def encode_tree(entries: list[dict[str, str]]) -> bytes:
    """The canonical bytes of a tree with these entries."""
    ordered = sorted(entries, key=lambda e: e["name"])
    return json.dumps({"entries": ordered}, sort_keys=True, separators=(",", ":")).encode()


def valid_name(name: str) -> bool:
    """An entry name a tree may hold (SPEC §11.2)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise CorruptTree("duplicate key")
    return found


def _no_constant(name: str) -> Any:
    raise CorruptTree(f"{name} is not JSON")


def parse_tree(data: bytes) -> list[tuple[str, str]]:
    """The (digest, type) of each entry; `CorruptTree` unless `data` is a
    tree in exactly its canonical bytes."""
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys,
                         parse_constant=_no_constant)
    except RecursionError:
        raise CorruptTree("nested too deeply") from None
    except (UnicodeDecodeError, ValueError):
        raise CorruptTree("not a JSON tree") from None
    if not isinstance(doc, dict) or list(doc) != ["entries"] or not isinstance(
            doc["entries"], list):
        raise CorruptTree("not an object holding only an entries list")
    names: set[str] = set()
    found = []
    for entry in doc["entries"]:
        if not isinstance(entry, dict) or sorted(entry) != list(ENTRY_KEYS):
            raise CorruptTree("an entry is not exactly {digest, name, type}")
        digest, kind, name = entry["digest"], entry["type"], entry["name"]
        if not isinstance(name, str) or not valid_name(name) or name in names:
            raise CorruptTree("an entry name is empty, a path, or a duplicate")
        names.add(name)
        if not is_digest(digest):
            raise CorruptTree("an entry digest is not a sha256 digest")
        if kind not in ("blob", "tree"):
            raise CorruptTree("an entry type is neither blob nor tree")
        found.append((digest, kind))
    if encode_tree(doc["entries"]) != data:
        raise CorruptTree("not in canonical form")
    return found


def _read_tree(store: ObjectStore, tenant_id: str, digest: str) -> bytes:
    """A tree object's bytes, read in chunks and refused past MAX_TREE_BYTES."""
    parts, size = [], 0
    with closing(store.chunks(tenant_id, digest)) as chunks:
        for chunk in chunks:
            size += len(chunk)
            if size > MAX_TREE_BYTES:
                raise CorruptTree("larger than a tree may be")
            parts.append(chunk)
    return b"".join(parts)


def _hashes_to(store: ObjectStore, tenant_id: str, digest: str,
               between: Callable[[], None] | None = None) -> bool:
    """True if the object's bytes hash to `digest`, read in chunks; `between`
    runs every 16 chunks too, so a job cancelled or past its deadline stops
    inside one huge blob (it hashed on after its tick had returned)."""
    hasher = hashlib.sha256()
    with closing(store.chunks(tenant_id, digest)) as chunks:
        for n, chunk in enumerate(chunks, 1):
            hasher.update(chunk)
            if between is not None and n % 16 == 0:
                between()
    return "sha256:" + hasher.hexdigest() == digest


@dataclass
class Walk:
    """What a closure walk found, and where it is: a walk can stop between
    two objects and go on later (`walk_closure(walk=...)`), so a closure too
    large for one tick is walked across claims (SPEC §17, `handlers.journal`)."""

    seen: set[str] = field(default_factory=set)
    present: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    corrupt: set[str] = field(default_factory=set)
    visited: set[tuple[str, str]] = field(default_factory=set)
    mismatched: set[str] = field(default_factory=set)  # bytes that do not hash to their digest
    todo: deque[tuple[str, str]] = field(default_factory=deque)
    # With `journaled`, each finding as (digest, type, status) since the
    # journal last took them (`handlers.journal`).
    journaled: bool = False
    news: list[tuple[str, str, str]] = field(default_factory=list)

    def verdict(self) -> dict[str, Any]:
        """The SPEC §10.1 verdict, lists cut at 50."""
        return {
            "closed": not self.missing and not self.corrupt,
            "objects": len(self.seen),
            "missing_count": len(self.missing),
            "corrupt_count": len(self.corrupt),
            "missing": sorted(self.missing)[:VERDICT_LIST_LIMIT],
            "corrupt": sorted(self.corrupt)[:VERDICT_LIST_LIMIT],
        }

    def found(self, digest: str, kind: str, status: str) -> None:
        """Record what visiting (digest, kind) found (a `walk_marks` status)."""
        self.visited.add((digest, kind))
        self.seen.add(digest)
        if status == "missing":
            self.missing.add(digest)
        elif status == "mismatch":
            self.mismatched.add(digest)
            self.corrupt.add(digest)
            self.present.discard(digest)
        elif status == "unparsed":
            self.corrupt.add(digest)  # its bytes may be an intact blob elsewhere
            self.present.add(digest)
        elif status == "present":
            self.present.add(digest)
        if self.journaled:
            self.news.append((digest, kind, status))

    def plan(self, digest: str, kind: str) -> None:
        """Put (digest, kind) on the list of objects still to visit."""
        self.todo.append((digest, kind))
        if self.journaled:
            self.news.append((digest, kind, "todo"))

    def revisit(self) -> None:
        """Visit again what was missing or corrupt: a producer may have
        uploaded it since, or written it anew, and a tree there now leads on
        to children the walk has not marked (GC deleted a live snapshot's
        blob that way: its tree was missing at the mark, then uploaded and
        registered while the epoch ran)."""
        absent = self.missing | self.corrupt
        again = [key for key in self.visited if key[0] in absent]
        self.missing.clear()
        self.corrupt.clear()
        self.mismatched.clear()
        for key in again:
            self.visited.discard(key)
            self.plan(*key)


def walk_closure(
    store: ObjectStore,
    tenant_id: str,
    root: str,
    *,
    verify: bool = True,
    between: Callable[[], None] | None = None,
    walk: Walk | None = None,
    pause: Callable[[Walk], bool] | None = None,
) -> Walk:
    """Visit every object reachable from `root`, once per (digest, type).

    Each tree is hashed against its digest; with `verify`, each blob too. A
    mismatch, or a tree that is not canonical, is corrupt and its children
    are not followed. Without `verify` (GC's mark) blobs are not read. `between` runs
    before each object read (heartbeat, cancellation check). Transport
    failures propagate as `StoreError`.

    Given `walk`, it goes on from where that walk stopped. `pause`, asked
    after each object, may stop it early: the walk returned then still has
    objects `todo`.
    """
    if walk is None:
        walk = Walk()
        walk.plan(root, "tree")
    todo, visited = walk.todo, walk.visited
    while todo:
        digest, kind = todo.popleft()
        if (digest, kind) in visited:
            continue
        if digest in walk.missing or digest in walk.mismatched:
            walk.found(digest, kind, "seen")  # its bytes are known: nothing more to learn
            continue
        if kind == "blob" and not verify:
            walk.found(digest, kind, "present")
            continue
        if between is not None:
            between()
        try:
            if kind == "blob":
                intact = _hashes_to(store, tenant_id, digest, between)
                children: list[tuple[str, str]] = []
            else:
                data = _read_tree(store, tenant_id, digest)
                # A tree's hash is checked even by GC's mark (its bytes are
                # read whole anyway): bytes decayed into another valid tree
                # would lead the mark to other children, and the real ones
                # would be deleted.
                intact = digest_of(data) == digest
                children = parse_tree(data) if intact else []
        except ObjectMissing:
            walk.found(digest, kind, "missing")
            continue
        except CorruptTree:
            walk.found(digest, kind, "unparsed")
            continue
        except ObjectRefused:  # a link, a FIFO, a directory: not the object's bytes
            walk.found(digest, kind, "mismatch")
            continue
        if not intact:
            walk.found(digest, kind, "mismatch")
            continue
        walk.found(digest, kind, "present")
        for child in children:
            if child not in visited:
                walk.plan(*child)
        if pause is not None and pause(walk):
            break
    return walk


def write_tree(store: ObjectStore, tenant_id: str, tree: TreeSpec) -> str:
    """Write a dict tree (names to bytes/str blobs or nested dicts); return its
    root. Iterative: a tree of any depth is written bottom-up."""
    digests: dict[int, str] = {}
    stack: list[tuple[Mapping[str, Any], bool]] = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            stack.append((node, True))
            stack.extend((v, False) for v in node.values() if isinstance(v, Mapping))
            continue
        entries = []
        for name, value in node.items():
            if not valid_name(name):
                raise ValueError(f"invalid tree entry name {name[:80]!r}")
            if isinstance(value, Mapping):
                entries.append({"name": name, "digest": digests[id(value)], "type": "tree"})
            else:
                data = value.encode() if isinstance(value, str) else bytes(value)
                entries.append({"name": name, "digest": store.put(tenant_id, data),
                                "type": "blob"})
        digests[id(node)] = store.put(tenant_id, encode_tree(entries))
    return digests[id(tree)]


def write_directory(store: ObjectStore, tenant_id: str, path: str | os.PathLike[str]) -> str:
    """Write a local directory as blobs and trees; return the root digest.

    Symbolic links and special files are skipped.
    """
    return write_tree(store, tenant_id, _read_directory(Path(path)))


def _read_directory(path: Path) -> dict[str, Any]:
    root: dict[str, Any] = {}
    todo: list[tuple[Path, dict[str, Any]]] = [(path, root)]
    while todo:
        folder, tree = todo.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_symlink():
                continue
            if entry.is_dir():
                tree[entry.name] = {}
                todo.append((entry, tree[entry.name]))
            elif entry.is_file():
                tree[entry.name] = entry.read_bytes()
    return root
