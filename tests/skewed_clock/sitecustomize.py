"""A host whose wall clock disagrees with the database's (SPEC §15, §16).

On an `awc` process's PYTHONPATH, this shifts the process's wall clock
(`datetime.now()`, `time.time()`) by `TEST_HOST_CLOCK_SKEW_SECS` seconds, as a
host whose NTP is off would. The database is real and untouched; only the
host's clock lies. `time.monotonic()` is left alone: it is no wall clock.
Python's own `datetime` type cannot be patched, so the module's name is
rebound to a subclass that answers `now()` late or early and that every
real datetime is still an instance of.
"""

from __future__ import annotations

import datetime as _datetime
import os
import time as _time
from typing import Any

_SKEW = float(os.environ.get("TEST_HOST_CLOCK_SKEW_SECS", "0") or 0)

if _SKEW:
    _real = _datetime.datetime
    _real_time = _time.time
    _real_time_ns = _time.time_ns

    class _AnyDatetime(type):
        def __instancecheck__(cls, value: Any) -> bool:
            return isinstance(value, _real)

        def __subclasscheck__(cls, klass: Any) -> bool:
            return issubclass(klass, _real)

    class _SkewedDatetime(_real, metaclass=_AnyDatetime):
        __slots__ = ()  # the size compiled extensions check at import

        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return _real.fromtimestamp(_real_time() + _SKEW, tz)

        @classmethod
        def utcnow(cls) -> Any:
            return _real.now(_datetime.UTC).replace(tzinfo=None) + _datetime.timedelta(
                seconds=_SKEW)

    _datetime.datetime = _SkewedDatetime  # type: ignore[misc]
    _time.time = lambda: _real_time() + _SKEW
    _time.time_ns = lambda: _real_time_ns() + int(_SKEW * 1e9)
