"""The workspace TTL machine (SPEC §10.3) as a pure rule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class Step:
    """A transition: the new state and its `expiring_since`."""

    state: str
    expiring_since: datetime | None


def next_step(
    state: str,
    expires_at: datetime,
    expiring_since: datetime | None,
    now: datetime,
    grace: timedelta,
) -> Step | None:
    """One step of the machine, or None when nothing is due.

    ACTIVE past `expires_at` -> EXPIRING (since now); EXPIRING whose
    `expires_at` was pushed past now -> ACTIVE; EXPIRING for longer than the
    grace -> EXPIRED. EXPIRED is final.
    """
    if state == "ACTIVE":
        return Step("EXPIRING", now) if now >= expires_at else None
    if state == "EXPIRING":
        if expires_at > now:
            return Step("ACTIVE", None)
        if expiring_since is None:
            # A row of plain SQL: its grace starts now, and is written down,
            # else every run started it again and it never expired.
            return Step("EXPIRING", now)
        return Step("EXPIRED", expiring_since) if now - expiring_since >= grace else None
    return None
