"""Named SQL statements (STYLE: one `.sql` file per queue operation).

The files live in `tick/sql/`; each is loaded once, by name, on first use.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent / "sql"


@cache
def sql(name: str) -> str:
    """The text of statement `name` (`tick/sql/<name>.sql`)."""
    return (_DIR / f"{name}.sql").read_text(encoding="utf-8")
