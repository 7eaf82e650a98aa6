"""The handler registry (SPEC §6.1): `@handler(kind, payload=..., lease_secs=...,
timeout_secs=...)`."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.engine.outcomes import ERROR_LIMIT
from tick.errors import HandlerImportError
from tick.timeouts import timeout_refusal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from tick.engine.context import JobContext

HandlerFn = Callable[["JobContext", Any], Any]
# The longest lease a handler may declare, as AWC_WORKER_LEASE_SECS (SPEC §2).
MAX_LEASE_SECS = 7 * 86400


@dataclass(frozen=True, slots=True)
class Handler:
    """A registered kind: its function, payload model, own lease and timeout."""

    kind: str
    fn: HandlerFn
    payload: type[BaseModel] | None = None
    lease_secs: int | None = None
    # How long one run may take (SPEC §26); None: its lease, pushed back by
    # each heartbeat (the rule from before timeouts).
    timeout_secs: float | None = None


class Registry:
    """Kinds to handlers. The engine looks kinds up here, once per claimed job."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        # Kinds registered by name whose module is imported on first use.
        self._loads: dict[str, str] = {}
        self._loading = threading.Lock()
        # Every handler a module registered, by kind and module: a module is
        # imported once, so registering its kind by name again reuses it.
        self._seen: dict[tuple[str, str], Handler] = {}

    def add(self, entry: Handler) -> None:
        """Register `entry`; re-registering a kind replaces the earlier handler."""
        self._handlers[entry.kind] = entry
        self._loads.pop(entry.kind, None)
        self._seen[entry.kind, getattr(entry.fn, "__module__", "")] = entry

    def defer(self, kind: str, module: str, lease_secs: int | None) -> None:
        """Register `kind` by name, with its own lease: `module`, whose
        `@handler` registers it, is imported when the engine first needs
        the handler (at once, if it registered it before). The built-in
        kinds come in so: their payload models are pydantic's, and building
        them cost every cold start that ran none of them 60 ms (decision
        0040)."""
        seen = self._seen.get((kind, module))
        if seen is not None:
            self.add(seen)
            return
        self._handlers[kind] = Handler(kind, _not_loaded, None, lease_secs)
        self._loads[kind] = module

    def get(self, kind: str) -> Handler | None:
        """The handler for `kind`, or None for an unknown kind."""
        if kind in self._loads:  # not a lock per job for the kinds never deferred
            with self._loading:
                module = self._loads.pop(kind, None)
                if module is not None:
                    importlib.import_module(module)
        return self._handlers.get(kind)

    def kinds(self) -> list[str]:
        """Registered kinds, sorted."""
        return sorted(self._handlers)

    def leases(self) -> dict[str, int]:
        """Kinds that declare their own lease, with its length in seconds."""
        return {k: h.lease_secs for k, h in self._handlers.items() if h.lease_secs}

    def __contains__(self, kind: object) -> bool:
        return kind in self._handlers


def _not_loaded(ctx: JobContext, payload: Any) -> Any:
    """A deferred kind's stand-in: its module's import did not register it."""
    raise RuntimeError("the kind's module did not register its handler")


REGISTRY = Registry()


def handler(
    kind: str,
    *,
    payload: type[BaseModel] | None = None,
    lease_secs: int | None = None,
    timeout_secs: float | None = None,
    registry: Registry | None = None,
) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn(ctx, payload)` as the handler of `kind`.

    With a pydantic `payload` model, a payload that does not validate is a
    `Fail` before the function runs; without one the function gets the dict.
    `timeout_secs` is how long one run may take (SPEC §26); the engine keeps
    the job's short lease renewed meanwhile, so the handler need not
    heartbeat. A job's own `timeout_secs` overrides it.
    """
    if not kind:
        raise ValueError("a handler kind must not be empty")
    if lease_secs is not None and not 1 <= lease_secs <= MAX_LEASE_SECS:
        raise ValueError(f"lease_secs must be between 1 and {MAX_LEASE_SECS} (a week)")
    if timeout_secs is not None:
        refusal = timeout_refusal(timeout_secs)
        if refusal is not None:
            raise ValueError(f"timeout_secs {refusal}")
        timeout_secs = float(timeout_secs)

    def register(fn: HandlerFn) -> HandlerFn:
        # A coroutine or generator function returns an object that never ran
        # the handler's body: each job failed as "result is not JSON". Refused
        # here, so the module's import names it (a startup error).
        import inspect

        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"the handler of {kind[:100]!r} is an async function; awc runs "
                            "handlers in threads: make it a plain function (asyncio.run "
                            "inside it, if it must await)")
        if inspect.isgeneratorfunction(fn):
            raise TypeError(f"the handler of {kind[:100]!r} is a generator function (it "
                            "yields); return the result instead")
        (registry or REGISTRY).add(Handler(kind, fn, payload, lease_secs, timeout_secs))
        return fn

    return register


def import_handler_modules(names: Iterable[str]) -> None:
    """Import `AWC_HANDLER_MODULES` so their `@handler`s register (SPEC §6.1).
    A module that fails names the file and line that failed (SPEC §22)."""
    for name in names:
        try:
            importlib.import_module(name)
        except KeyboardInterrupt:
            raise  # an operator's ^C: awc's own "aborted"
        except BaseException as error:  # SystemExit too: it exited 0, saying nothing
            from tick.tracebacks import import_location

            where = import_location(error)
            # A SyntaxError's own text names the file without its directory.
            # The message is the module's to write: cut as last_error is (a
            # module raising 300 KB made a 300 KB line), and read even if
            # reading it raises.
            try:
                text = error.msg if isinstance(error, SyntaxError) and where else str(error)
            except BaseException:
                text = "(the exception's message could not be read)"
            raise HandlerImportError(
                f"AWC_HANDLER_MODULES: cannot import {name[:200]!r}: "
                f"{type(error).__name__[:100]}: {str(text)[:ERROR_LIMIT]}"
                + (f" ({where})" if where else "")
            ) from None
