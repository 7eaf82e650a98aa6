"""A job's timeout (SPEC §26): how long one run may take, apart from its
lease. The bounds are checked the same way wherever a timeout comes in (the
handler's declaration, `enqueue`, `enqueue_many`, `awc enqueue --timeout`);
the column's check says the same in SQL (migrations/0014_job_timeout.sql)."""

from __future__ import annotations

import math

# The longest a job may run, whether its handler or its producer says.
MAX_TIMEOUT_SECS = 7 * 86400


def timeout_refusal(value: object) -> str | None:
    """Why `value` is no timeout (1 s to 7 days; 0, negatives, NaN,
    infinities and non-numbers are refused), or None if it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number of seconds"
    if math.isnan(value) or not 1 <= value <= MAX_TIMEOUT_SECS:
        return f"must be between 1 and {MAX_TIMEOUT_SECS} seconds (7 days)"
    return None
