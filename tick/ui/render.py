"""How the console shows values: times relative with the absolute one on
hover, capped counts, cut text (Jinja2 filters)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

from tick.ui.reads import CAP


def ago(value: datetime | str | None) -> Markup:
    """`<time>` reading "3 min ago" (or "in 3 min"), the instant in its title.
    An instant Python cannot hold (`infinity`, a year past 9999) arrives as
    the server's text (tick.loaders.ShownTimestamptz) and is shown as it is."""
    if value is None:
        return Markup('<span class="muted">—</span>')
    if isinstance(value, str) or value.tzinfo is None:
        return Markup('<span class="muted">{0}</span>').format(str(value))
    now = datetime.now(UTC)
    secs = (now - value).total_seconds()
    text = _span(abs(secs))
    # "now" reads alone: never "now ago" or "in now".
    label = text if text == "now" else f"{text} ago" if secs >= 0 else f"in {text}"
    stamp = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{0}" title="{1}">{2}</time>').format(
        value.isoformat(), stamp, label)


def _span(secs: float) -> str:
    if secs < 1:
        return "now" if secs < 0.5 else "1 s"
    for size, unit in ((86400 * 365, "y"), (86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if secs >= size:
            return f"{int(secs // size)} {unit}"
    return "now"


def count(value: int | None, at_least: bool = False) -> str:
    """A capped count: past the cap, "10,000+"; `at_least` when it was
    counted among capped rows, so it may be more ("12+")."""
    if value is None:
        return "—"
    if value > CAP:
        return f"{CAP:,}+"
    return f"{value:,}+" if at_least else f"{value:,}"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return _span(value)


def cut(value: Any, limit: int = 120) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def state(value: str | None) -> Markup:
    """A state as a coloured badge."""
    if not value:
        return Markup('<span class="muted">—</span>')
    return Markup('<span class="badge state-{0}">{1}</span>').format(
        escape(value.lower()), escape(value))


def segment(value: Any) -> str:
    """A name as one segment of a path, every `/` escaped too (Jinja's
    `urlencode` keeps it): a browser resolves a `..` segment before it
    sends, so the Pause of a schedule named `victim/x/..` paused `victim`."""
    return quote("" if value is None else str(value), safe="")


FILTERS = {"ago": ago, "count": count, "seconds": seconds, "cut": cut, "state": state,
           "segment": segment}
