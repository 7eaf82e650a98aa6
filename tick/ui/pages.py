"""The console's endpoints (SPEC §19): one function per page or action.

Reads parse their input first (`tick.ui.filters`: a bad value is a 400
page), then query (`tick.ui.reads`). Actions check, in this order: not
read-only, the CSRF token, the input; only then change anything
(`tick.ui.actions`). A refused action answers 403 and changes nothing.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from psycopg_pool import PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from tick.errors import AwcError, DatabaseError, JobNotFound, JobStateError, MigrationError
from tick.ui import actions, reads
from tick.ui.access import LOGIN_COOKIE, SESSION_COOKIE, SESSION_SECS, csrf_matches
from tick.ui.chart import throughput_svg
from tick.ui.filters import (
    BadInput,
    JobFilter,
    after,
    before,
    driver,
    job_id,
    limit_target,
    payload_search,
    schedule_name,
    tick_cursor,
)

if TYPE_CHECKING:
    from starlette.requests import Request

    from tick.ui.console import Console

Endpoint = Callable[..., Any]


def _console(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


def _answer(request: Request, console: Console, call: Callable[[], Response]) -> Response:
    """`call`'s page; the console's known refusals become pages with a status,
    a database that does not answer a 503, never a traceback."""
    import psycopg

    from tick.schedules import ScheduleError, ScheduleNotFound, ScheduleUnusable

    try:
        return call()
    except BadInput as error:
        return console.problem(request, 400, f"awc: {error}")
    except (JobNotFound, ScheduleNotFound) as error:
        return console.problem(request, 404, f"awc: {error}")
    except (JobStateError, ScheduleUnusable) as error:
        return console.problem(request, 409, f"awc: {error}")
    except ScheduleError as error:
        # A schedule written past `add`'s checks (parked by firing): its
        # cron or time zone cannot be used, so it cannot be resumed either.
        name = request.path_params.get("name", "")
        return console.problem(request, 409, f"awc: schedule {name[:200]!r} cannot be used "
                               f"as stored: {error}; fix it with awc schedules add or sync")
    except psycopg.errors.UniqueViolation:
        return console.problem(request, 409, "awc: a live job holds a dedupe key one of "
                               "these jobs needs; nothing was changed, try again")
    except (psycopg.Error, DatabaseError, MigrationError) as error:
        # The class only: a server message may quote a value. A statement
        # the server refused (an index row too large, a constraint) is not a
        # database that did not answer: those are a lost connection (08),
        # a cancel, timeout or shutdown (57), resources (53) or the system (58).
        state = error.sqlstate if isinstance(error, psycopg.Error) else None
        if state is not None and state[:2] not in ("08", "53", "57", "58"):
            return console.problem(request, 409, "awc: the database refused it "
                                   f"({type(error).__name__}); nothing was changed")
        if state is not None and state[:2] == "53":  # it answered: no room to do it now
            return console.problem(request, 503, "awc: the database is short of resources "
                                   f"({type(error).__name__}); try again later")
        if isinstance(error, PoolTimeout):  # every connection of the pool is in use, or none
            return console.problem(request, 503, "awc: no database connection came in time "
                                   "(PoolTimeout: the console's are busy, or the server "
                                   "takes no more: max_connections?)")
        return console.problem(request, 503, "awc: the database did not answer "
                               f"({type(error).__name__})")
    except AwcError as error:  # awc's own refusals: their messages are safe to show
        return console.problem(request, 409, f"awc: {error}")


def _csrf_refusal(request: Request, console: Console, form: Any) -> Response | None:
    """403 unless the form carries this session's CSRF token."""
    session = request.scope.get("awc.session")
    if session is None or not csrf_matches(session.csrf, form.get("csrf")):
        return console.problem(request, 403, "awc: the form's CSRF token is missing or "
                               "wrong; reload the page and try again")
    return None


def answers(fn: Callable[[Request, Console], Response]) -> Endpoint:
    """A page (run in Starlette's thread pool, as a plain function)."""

    @functools.wraps(fn)
    def endpoint(request: Request) -> Response:
        console = _console(request)
        return _answer(request, console, lambda: fn(request, console))

    return endpoint


def acts(fn: Callable[[Request, Console, Any], Response]) -> Endpoint:
    """An action: refused with 403 in read-only mode or without the
    session's CSRF token, before its input is even parsed."""

    async def endpoint(request: Request) -> Response:
        console = _console(request)
        if console.read_only:
            return console.problem(request, 403, "awc: the console is read-only")
        form = await request.form(max_files=0, max_fields=20)
        refused = _csrf_refusal(request, console, form)
        if refused is not None:
            return refused
        response: Response = await run_in_threadpool(
            _answer, request, console, lambda: fn(request, console, form))
        return response

    return endpoint


# -- access ---------------------------------------------------------------------


def login_form(request: Request) -> Response:
    console = _console(request)
    # A second GET (another tab, a prefetch) keeps the nonce the first form holds.
    held = request.cookies.get(LOGIN_COOKIE, "")
    fresh = len(held) == 32 and held.isascii() and held.replace("-", "").replace("_", "").isalnum()
    nonce = held if fresh else secrets.token_urlsafe(24)
    response = console.page(request, "login.html", login_nonce=nonce,
                            next=_next(request.query_params.get("next", "/")))
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=600, httponly=True, samesite="strict",
                        path="/login")
    return response


def _next(target: str) -> str:
    # Only a path of this console: never an absolute or scheme-relative URL.
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def login(request: Request) -> Response:
    console = _console(request)
    address = request.client.host if request.client else "unknown"
    form = await request.form(max_files=0, max_fields=10)
    if not csrf_matches(request.cookies.get(LOGIN_COOKIE, ""), form.get("login_nonce")):
        return console.problem(request, 403, "awc: the sign-in form expired; reload it")
    token = form.get("token")
    # Only wrong tokens are throttled: the right one signs in even while its
    # address is (others behind the same proxy guessed); the token's length
    # and randomness are what stop guessing (docs/decisions, "sign-in throttle").
    if not isinstance(token, str) or not console.gate.token_matches(token):
        if console.gate.throttled(address):
            console.gate.failed(address)
            return console.problem(request, 429, "awc: too many failed sign-ins from this "
                                   "address; wait a minute")
        console.gate.failed(address)
        console.report(request.scope, 401)  # never the offered token
        nonce = secrets.token_urlsafe(24)
        response = console.page(request, "login.html", 401, login_nonce=nonce,
                                next=_next(_text(form, "next")), failed=True)
        response.set_cookie(LOGIN_COOKIE, nonce, max_age=600, httponly=True,
                            samesite="strict", path="/login")
        return response
    response = RedirectResponse(_next(_text(form, "next") or "/"), status_code=303)
    response.set_cookie(SESSION_COOKIE, console.gate.open(), max_age=SESSION_SECS,
                        httponly=True, samesite="strict", path="/")
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    console = _console(request)
    form = await request.form(max_files=0, max_fields=10)
    refused = _csrf_refusal(request, console, form)
    if refused is not None:
        return refused
    console.gate.close(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _count(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


def _text(form: Any, name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


# -- pages ----------------------------------------------------------------------


@answers
def overview(request: Request, console: Console) -> Response:
    with console.pool.connection() as conn:
        data = reads.overview(conn)
    return console.page(request, "overview.html", refresh=True, data=data,
                        chart=throughput_svg(data["hours"]))


@answers
def jobs(request: Request, console: Console) -> Response:
    where = JobFilter.parse(request.query_params)
    cursor = before(request.query_params)
    newer = after(request.query_params)
    payload = payload_search(request.query_params)
    if cursor is not None and newer is not None:
        raise BadInput("give before or after, not both")
    with console.pool.connection() as conn:
        page = reads.jobs(conn, where, cursor, after=newer, payload=payload)
        kinds, queues = reads.job_names(conn)
    return console.page(request, "jobs.html", refresh=cursor is None and newer is None,
                        where=where, page=page, payload=payload, kinds=kinds, queues=queues,
                        window=reads.WINDOW, cap=actions.BULK_CAP, count_cap=reads.CAP,
                        bulk_states=actions.BULK_STATES)


@answers
def job(request: Request, console: Console) -> Response:
    wanted = job_id(request.path_params["id"])
    with console.pool.connection() as conn:
        found = reads.job(conn, wanted)
    if found is None:
        return console.problem(request, 404, f"awc: job {wanted} does not exist")
    return console.page(request, "job.html", refresh=True, job=found)


@acts
def job_action(request: Request, console: Console, form: Any) -> Response:
    wanted = job_id(request.path_params["id"])
    action = request.path_params["action"]
    act = {"retry": actions.retry, "cancel": actions.cancel, "discard": actions.discard}
    if action not in act:
        return console.problem(request, 404, "awc: no such action")
    with console.pool.connection() as conn:
        act[action](conn, wanted)
    # It says what it did (SPEC §22); a discarded job has no page left.
    back = "/jobs" if action == "discard" else f"/jobs/{wanted}"
    return RedirectResponse(f"{back}?did={action}&job={wanted}", status_code=303)


def _bulk(request: Request, params: Any) -> actions.Bulk:
    action = params.get("action", "")
    if action not in actions.BULK_STATES:
        raise BadInput("action must be retry, cancel or discard")
    return actions.Bulk(action, JobFilter.parse(params))


@answers
def bulk_preview(request: Request, console: Console) -> Response:
    if console.read_only:
        return console.problem(request, 403, "awc: the console is read-only")
    bulk = _bulk(request, request.query_params)
    with console.pool.connection() as conn:
        preview = bulk.preview(conn)
    return console.page(request, "bulk.html", bulk=bulk, preview=preview,
                        cap=actions.BULK_CAP, states=bulk.states())


@acts
def bulk_apply(request: Request, console: Console, form: Any) -> Response:
    bulk = _bulk(request, {k: _text(form, k) for k in ("action", "state", "kind", "queue", "id")})
    seal = _text(form, "seal")
    if not seal:
        raise BadInput("seal is missing: open the preview and confirm from there")
    with console.pool.connection() as conn:
        done = bulk.apply(conn, seal)
    if isinstance(done, actions.Preview):
        # The matching jobs changed since the preview: show the new set, change nothing.
        return console.page(request, "bulk.html", 409, bulk=bulk, preview=done,
                            changed_since=True, seen=_count(_text(form, "seen")),
                            cap=actions.BULK_CAP, states=bulk.states())
    return console.page(request, "bulk.html", bulk=bulk, changed=done,
                        cap=actions.BULK_CAP, states=bulk.states())


@answers
def schedules(request: Request, console: Console) -> Response:
    after = schedule_name(request.query_params)
    with console.pool.connection() as conn:
        rows, more = reads.schedules(conn, after)
    return console.page(request, "schedules.html", refresh=True, rows=rows, more=more,
                        after=after)


@answers
def schedule(request: Request, console: Console) -> Response:
    name = schedule_name(request.path_params, "name")
    with console.pool.connection() as conn:
        found = reads.schedule(conn, name)
    if found is None:
        return console.problem(request, 404, "awc: no such schedule")
    return console.page(request, "schedule.html", refresh=True, s=found)


@acts
def schedule_action(request: Request, console: Console, form: Any) -> Response:
    name = schedule_name(request.path_params, "name")
    action = request.path_params["action"]
    if action not in ("pause", "resume", "trigger"):
        return console.problem(request, 404, "awc: no such action")
    with console.pool.connection() as conn:
        job = actions.schedule(conn, action, name)
    said = f"?did={action}" + (f"&job={job}" if job is not None else "")
    return RedirectResponse(f"/schedules/{quote(name, safe='')}{said}", status_code=303)


@answers
def ticks(request: Request, console: Console) -> Response:
    which = driver(request.query_params)
    cursor = tick_cursor(request.query_params)
    with console.pool.connection() as conn:
        rows, more = reads.ticks(conn, which, cursor)
    return console.page(request, "ticks.html", refresh=cursor is None, rows=rows, more=more,
                        driver=which)


@answers
def limits(request: Request, console: Console) -> Response:
    with console.pool.connection() as conn:
        rows = reads.limits(conn)
    return console.page(request, "limits.html", refresh=True, rows=rows)


@acts
def limit_action(request: Request, console: Console, form: Any) -> Response:
    """Pause or resume a kind or queue from the Limits page (SPEC §22)."""
    action = request.path_params["action"]
    if action not in ("pause", "resume"):
        return console.problem(request, 404, "awc: no such action")
    scope, name = limit_target({"target": _text(form, "target")})
    with console.pool.connection() as conn:
        done = actions.limit(conn, action, scope, name)
    did = "paused-already" if done == "was paused already" else action
    return RedirectResponse(f"/limits?{urlencode({'did': did, 'target': f'{scope}:{name}'})}",
                            status_code=303)
