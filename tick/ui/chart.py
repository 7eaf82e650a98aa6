"""The overview's throughput chart: 24 hourly stacked bars as SVG, drawn on
the server (no script, nothing for the CSP to allow)."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 720, 160, 24
SERIES = (("completed", "bar-completed"), ("retried", "bar-retried"), ("failed", "bar-failed"))


def throughput_svg(hours: list[dict[str, Any]]) -> str:
    """Bars of completed, retried and failed jobs per hour, oldest left."""
    top = max((sum(h[name] for name, _ in SERIES) for h in hours), default=0) or 1
    slot = (WIDTH - PAD) / max(len(hours), 1)
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT + PAD}" role="img" '
             f'aria-label="Jobs per hour, last 24 hours" xmlns="http://www.w3.org/2000/svg">',
             f'<text class="axis" x="0" y="12">{top:,}</text>',
             f'<line class="grid" x1="{PAD}" y1="{PAD // 2}" x2="{WIDTH}" y2="{PAD // 2}"/>',
             f'<line class="grid" x1="{PAD}" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}"/>']
    usable = HEIGHT - PAD // 2
    for n, hour in enumerate(hours):
        x = PAD + n * slot + 1
        base = float(HEIGHT)
        at: datetime = hour["hour"]
        tip = ", ".join(f"{hour[name]:,} {name}" for name, _ in SERIES)
        parts.append(f"<g><title>{escape(at.strftime('%Y-%m-%d %H:00 %Z'))}: {tip}</title>")
        for name, css in SERIES:
            h = usable * hour[name] / top
            if h > 0:
                base -= h
                parts.append(f'<rect class="{css}" x="{x:.1f}" y="{base:.1f}" '
                             f'width="{slot - 2:.1f}" height="{h:.1f}"/>')
        parts.append(f'<rect class="bar-hit" x="{x:.1f}" y="0" width="{slot - 2:.1f}" '
                     f'height="{HEIGHT}"/></g>')
        if n % 6 == 0:
            parts.append(f'<text class="axis" x="{x:.1f}" y="{HEIGHT + 16}">'
                         f'{escape(at.strftime("%H:00"))}</text>')
    parts.append("</svg>")
    return "".join(parts)
