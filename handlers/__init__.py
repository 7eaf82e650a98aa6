"""awc's job handlers (SPEC §10, §11), installed as `tick.handlers`.

    kinds/      one module per built-in kind, with payloads, records, ttl
    stores/     the object store protocol and its memory, file and s3 backends
    runtime.py  settings, store and pool the kinds share in a process
    producer.py the upload protocol, for control planes written in Python
    trees.py    the tree format and the closure walk
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tick.settings import Settings

    from .stores.base import ObjectStore



def configure(settings: Settings, store: ObjectStore | None = None) -> None:
    """Open the object store named by `AWC_CAS_URL` (unless one is given) and
    register the built-in kinds for this process."""
    from tick.engine.registry import REGISTRY

    from .kinds import KINDS
    from .runtime import Runtime, install
    from .stores import open_store

    if store is None:
        store = open_store(settings.require_cas_url(), settings)
    install(Runtime(settings=settings, store=store))
    for kind, lease_secs in KINDS.items():
        REGISTRY.defer(kind, f"{__name__}.kinds.{kind}", lease_secs)
