"""A pydantic `ValidationError` as one short line (SPEC §3): where each
problem is and what it is, never the input.

Whoever writes the input may write a great many problems into it (100,000
bad kinds in a Lambda event made a 5 MB error), so the first few are named
and the rest counted. A place in the input is the model's own field names
and list indices; a key the input chose (a mapping's key, a field the model
does not have) is the input's content, so it is shown as `(key)`, never as
its text: a payload's keys may be e-mail addresses, tokens or terminal
escapes.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Collection
from functools import lru_cache
from typing import Any

# Problems named in full; the rest are counted.
SHOWN = 3
# A key the input chose, in place of its text.
KEY = "(key)"


def brief(error: Any, names: Collection[str] | None = None, shown: int = SHOWN) -> str:
    """`error`'s problems as `place: message; ...; and N more`. `names`: the
    field names a place may show (`declared_names(model)`); None when every
    place is the model's own (a model that ignores extra keys and has no
    mapping field)."""
    items = error.errors(include_input=False, include_url=False, include_context=False)
    return counted([f"{place(item.get('loc', ()), names)}: {item.get('msg', 'invalid')}"
                    for item in items[:shown]], len(items), shown)


def counted(parts: list[str], total: int, shown: int = SHOWN) -> str:
    """The first `shown` of `total` problems (`parts` holds at least those),
    joined, and the rest counted."""
    said = parts[:shown]
    if total > shown:
        said.append(f"and {total - shown:,} more")
    return "; ".join(said)


def place(loc: tuple[Any, ...], names: Collection[str] | None) -> str:
    """A problem's place: indices and declared names as they are, any other
    key as `(key)`."""
    return ".".join(str(part) if isinstance(part, int) or names is None or part in names
                    else KEY for part in loc)


@lru_cache(maxsize=256)
def declared_names(model: type) -> frozenset[str]:
    """Every field name and alias `model` and the models, dataclasses and
    typed dicts of its fields declare, however nested."""
    found: set[str] = set()
    seen: set[int] = set()

    def walk(kind: Any) -> None:
        if id(kind) in seen:
            return
        seen.add(id(kind))
        fields = getattr(kind, "model_fields", None)
        if isinstance(fields, dict):  # a pydantic model
            for name, info in fields.items():
                found.add(name)
                for alias in (info.alias, info.validation_alias):
                    if isinstance(alias, str):
                        found.add(alias)
                walk(info.annotation)
        elif dataclasses.is_dataclass(kind) and isinstance(kind, type):
            for field in dataclasses.fields(kind):
                found.add(field.name)
                walk(field.type)
        elif typing.is_typeddict(kind):
            for name, hint in typing.get_type_hints(kind).items():
                found.add(name)
                walk(hint)
        for arg in typing.get_args(kind):  # list[M], dict[str, M], M | None, Annotated
            walk(arg)

    walk(model)
    return frozenset(found)
