"""A handler whose code names a source file that is not a regular file
(tests/test_error_history.py): AWC_TEST_ODD_SOURCE names it, a FIFO or
/dev/zero, as a module's .py replaced after import would be. The handler
sleeps `secs` of its payload, then raises."""

from __future__ import annotations

import os
import time
from typing import Any

from tick import JobContext, handler

_SOURCE = ("def run(payload, nap):\n"
           "    nap(float(payload.get('secs', 0)))\n"
           "    raise RuntimeError('from an odd source file')\n")
_space: dict[str, Any] = {}
exec(compile(_SOURCE, os.environ["AWC_TEST_ODD_SOURCE"], "exec"), _space)


@handler("odd_source")
def odd_source(ctx: JobContext, payload: Any) -> None:
    _space["run"](payload, time.sleep)
