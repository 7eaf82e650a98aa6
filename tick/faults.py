"""Whose a database error is (SPEC §4.2, docs/decisions/0036): a row's own
refusal, a refusal that passes, a session the server ended. Every SQLSTATE
class awc tells apart is named here, and read by `tick.db`, the flush and
`tick.queue`."""

from __future__ import annotations

# The SQLSTATE classes of an error that is a row's own (SPEC §4.2): its
# data (22), a constraint (23), a value past a limit (54: a result too
# large to index), a row met twice (21) or a function's check (P0: an
# operator's trigger). Any other refusal (a privilege, a lock, a deadlock, a
# cancel, the server's resources, a prepared statement the session lost) is
# the exchange's: sent alone, an outcome it meets is not refused but raised,
# and fails no job.
ROW_FAULTS = ("21", "22", "23", "54", "P0")
# A prepared statement the server does not know, or knows already: the
# session is not awc's alone, as behind a transaction pooler (PgBouncer
# before 1.21) with AWC_DB_PREPARE left on.
PREPARED_GONE = ("26000", "42P05")
# The server ended the session (an administrator, a shutdown, an idle
# timeout), besides class 08: its FATAL can come before the socket's end.
SESSION_ENDED = ("57P01", "57P02", "57P03", "57P05", "25P03")
# Refusals of a claim that pass (a cancel, a lock timeout, a serialization
# failure, a deadlock; class 53, the server short of disk, memory or locks):
# that turn claims nothing, the run goes on and records what it holds.
PASSING_FAULTS = ("57014", "55P03", "40001", "40P01", "53")


def passing_fault(error: BaseException) -> bool:
    """Whether a claim refused with `error` passes (PASSING_FAULTS)."""
    sqlstate = str(getattr(error, "sqlstate", None) or "")
    return bool(sqlstate) and (sqlstate in PASSING_FAULTS or sqlstate[:2] in PASSING_FAULTS)


def row_fault(error: BaseException) -> bool:
    """Whether `error`, met by an exchange writing one row, is that row's
    own: a refusal of its values (ROW_FAULTS), or none from the server at
    all (a value psycopg could not send: a NUL, a lone surrogate)."""
    sqlstate = getattr(error, "sqlstate", None)
    return sqlstate is None or str(sqlstate)[:2] in ROW_FAULTS


def session_ended(error: BaseException | None) -> bool:
    """Whether `error`, or one it was raised while handling, says the session
    is over, its connection perhaps not yet closed: the server ended it, or
    libpq failed on its own (an OperationalError with no SQLSTATE: "cannot
    exit pipeline mode while busy" after a FATAL)."""
    import psycopg

    for _ in range(8):  # a chain, bounded: a handler's error may chain itself
        if error is None:
            return False
        sqlstate = getattr(error, "sqlstate", None)
        if (str(sqlstate or "")[:2] == "08" or sqlstate in SESSION_ENDED
                or (type(error) is psycopg.OperationalError and sqlstate is None)):
            return True
        error = error.__cause__ or error.__context__
    return False
