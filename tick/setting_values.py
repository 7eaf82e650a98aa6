"""How one setting's text becomes its value (SPEC §2), for `tick.settings`.

A parser takes what the environment, a flag or a caller gave (a string, or
an int, bool or string a flag or the Python API already typed) and returns
the value, or raises `ValueError` with a message that quotes nothing of the
input: a value may be a secret. The messages are the ones operators read
from the settings model before it was plain Python (decision 0040).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Parser = Callable[[Any], Any]

_TRUE = frozenset({"1", "true", "TRUE"})
_FALSE = frozenset({"0", "false", "FALSE", ""})
_DIGITS_MAX = 30  # far past every bound; a megabyte of digits is not parsed


class Secret:
    """A value that is never shown: `str`, `repr` and formatting mask it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def revealed(value: Any) -> str:
    """The text of a secret given either way: a `Secret`, anything with a
    `get_secret_value` (pydantic's `SecretStr`), or a string."""
    reveal = getattr(value, "get_secret_value", None)
    return str(reveal()) if callable(reveal) else str(value)


def flag(value: Any) -> bool:
    """Exactly the spellings of SPEC §2, nothing a library would guess."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    raise ValueError("must be one of 1, true, TRUE, 0, false, FALSE or empty")


def integer(low: int, high: int) -> Parser:
    """A whole number in [low, high], written in ASCII digits with an
    optional sign and surrounding blanks."""

    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError("Input should be a valid integer")
        number: int
        if isinstance(value, str):
            text = value.strip()
            digits = text[1:] if text[:1] in ("+", "-") else text
            if not (digits.isascii() and digits.isdigit()) or len(digits) > _DIGITS_MAX:
                raise ValueError("Input should be a valid integer, unable to parse string "
                                 "as an integer")
            number = int(text)
        else:
            number = value
        if number < low:
            raise ValueError(f"Input should be greater than or equal to {low}")
        if number > high:
            raise ValueError(f"Input should be less than or equal to {high}")
        return number

    return parse


def choice(*allowed: str) -> Parser:
    """One of `allowed`, spelled exactly."""
    said = ", ".join(f"'{a}'" for a in allowed[:-1]) + f" or '{allowed[-1]}'"

    def parse(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"Input should be {said}")
        return value

    return parse


def text(min_length: int = 0, max_length: int | None = None) -> Parser:
    """A string, of at least `min_length` and at most `max_length` characters."""

    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("Input should be a valid string")
        if len(value) < min_length:
            plural = "" if min_length == 1 else "s"
            raise ValueError(f"String should have at least {min_length} character{plural}")
        if max_length is not None and len(value) > max_length:
            raise ValueError(f"String should have at most {max_length} characters")
        return value

    return parse


def secret(check: Callable[[str], str | None]) -> Parser:
    """A `Secret` whose text `check` accepts (`check` returns the text to
    keep, or None for unset, or raises)."""

    def parse(value: Any) -> Secret | None:
        kept = check(revealed(value))
        return None if kept is None else Secret(kept)

    return parse
