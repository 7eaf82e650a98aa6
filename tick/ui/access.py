"""Who may use the console (SPEC §19): the token, sessions, CSRF, throttling.

The token is checked once, on the login page, in constant time. A good
token earns a session: a random id in an HttpOnly, SameSite=Strict cookie,
mapped in this process's memory to the session's CSRF token. Neither the
cookie nor the CSRF token is derived from the token, so nothing a browser
holds or a page shows can give the token away. Sessions end after
`SESSION_SECS`, on logout, or when the process restarts (sign in again).

Failed logins are throttled per client address: past FAILURES_PER_WINDOW
wrong tokens a minute, a wrong token is answered 429. The right token is
never throttled, so operators behind one proxy address cannot lock each
other out; guessing is stopped by the token itself (at least 16 characters,
random: see the decision "sign-in throttle").
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

SESSION_COOKIE = "awc_session"
LOGIN_COOKIE = "awc_login"  # the login form's own CSRF pair (double submit)
SESSION_SECS = 8 * 3600
# Bounded memory whatever a client sends: the oldest sessions and the
# oldest throttled addresses are forgotten first.
MAX_SESSIONS = 1000
MAX_ADDRESSES = 10_000
FAILURES_PER_WINDOW = 10
FAILURE_WINDOW_SECS = 60.0


@dataclass
class Session:
    csrf: str
    expires: float


@dataclass
class Gate:
    """The console's sessions and login throttle (one per app)."""

    token: str
    sessions: dict[str, Session] = field(default_factory=dict)
    failures: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def token_matches(self, offered: str) -> bool:
        # compare_digest on bytes: constant time whatever the text holds.
        return hmac.compare_digest(offered.encode("utf-8", "surrogatepass"),
                                   self.token.encode("utf-8"))

    def throttled(self, address: str, now: float | None = None) -> bool:
        """Whether `address` failed too often in the last window."""
        at = time.monotonic() if now is None else now
        with self.lock:
            recent = [t for t in self.failures.get(address, []) if at - t < FAILURE_WINDOW_SECS]
            if recent:
                self.failures[address] = recent
            else:
                self.failures.pop(address, None)
            return len(recent) >= FAILURES_PER_WINDOW

    def failed(self, address: str, now: float | None = None) -> None:
        at = time.monotonic() if now is None else now
        with self.lock:
            if address not in self.failures and len(self.failures) >= MAX_ADDRESSES:
                self.failures.pop(next(iter(self.failures)))
            self.failures.setdefault(address, []).append(at)

    def open(self, now: float | None = None) -> str:
        """A new session's id."""
        at = time.monotonic() if now is None else now
        sid = secrets.token_urlsafe(32)
        with self.lock:
            for old in [k for k, s in self.sessions.items() if s.expires <= at]:
                del self.sessions[old]
            while len(self.sessions) >= MAX_SESSIONS:
                self.sessions.pop(next(iter(self.sessions)))
            self.sessions[sid] = Session(secrets.token_urlsafe(32), at + SESSION_SECS)
        return sid

    def session(self, sid: str | None, now: float | None = None) -> Session | None:
        if not sid:
            return None
        at = time.monotonic() if now is None else now
        with self.lock:
            found = self.sessions.get(sid)
            if found is None or found.expires <= at:
                self.sessions.pop(sid, None)
                return None
            return found

    def close(self, sid: str | None) -> None:
        if sid:
            with self.lock:
                self.sessions.pop(sid, None)


def csrf_matches(expected: str, offered: object) -> bool:
    """A form's CSRF token against its session's, in constant time."""
    if not isinstance(offered, str) or not offered:
        return False
    return hmac.compare_digest(offered.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8"))
