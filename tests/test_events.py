"""SPEC §9: structured events (the text format's escaping)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("kind", ["a\nts level event=forged", 'k" x="y', "k=v", "tab\there",
                                  "\u2028line", "\udcff", ""])
def test_text_events_escape_every_field(kind: str) -> None:
    # SPEC §9: with AWC_LOG_FORMAT=text no field can forge a line or a field.
    import io
    import shlex

    from tick.events import JobEvent, StreamEvents

    out = io.StringIO()
    sink = StreamEvents("text", out)
    sink.jobs([JobEvent(7, kind, "failed", "FAILED", 1, 0.01, 0.1)])
    sink.log("info", "event with space", kind=kind, n=3)
    lines = out.getvalue().split("\n")
    assert len(lines) == 3 and lines[2] == ""
    for line in lines[:2]:
        assert line.isascii()
        fields = shlex.split(line.split(" ", 2)[2].replace("\\\\", "\\\\\\\\"), posix=True)
        assert sum(f.startswith("kind=") for f in fields) == 1
