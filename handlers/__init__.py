"""awc's job handlers by kind, their payload models, and the object stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tick.settings import Settings


def configure(settings: Settings) -> None:
    """Register the built-in kinds for this process (SPEC §10)."""
