"""awc's job handlers by kind (SPEC §10), their payload models, and the
object stores they use (SPEC §11)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tick.settings import Settings

    from .store import ObjectStore

BUILTIN_KINDS = ("validate", "scrub", "expire", "retain", "gc", "prune")


def configure(settings: Settings, store: ObjectStore | None = None) -> None:
    """Open the object store named by `AWC_CAS_URL` (unless one is given) and
    register the built-in kinds for this process."""
    from .runtime import Runtime, install
    from .store import open_store

    if store is None:
        store = open_store(settings.require_cas_url(), settings)
    install(Runtime(settings=settings, store=store))
    for module in BUILTIN_KINDS:
        importlib.import_module(f"{__name__}.{module}")
