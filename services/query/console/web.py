"""The console's routes, beside the query API in the same aiohttp application.

The page is static (``static/``: HTML, a few ES modules, one stylesheet; no build step) and reads
everything through the query API's ``/v1`` endpoints, which accept the console's session in
place of a bearer key, with the same tenant scoping. The only writes are two forms. The resolve
form calls the same resolve operation as ``intentledger resolve`` (a ``Resolution`` on
``ledger.resolutions``, applied or refused by the dispatcher under the policy's resolution
rules); the cancel form the same cancellation as ``intentledger runs cancel`` (applied only for
an operator of the run's tenant). Both act as the signed-in person, never as whoever the form
says: signed with the console's key, the person named in the signature's ``person`` claim
(``ConsoleSettings``).

Every response carries a content security policy that allows this origin's script and
stylesheet only (no inline script, no eval, no framing), and the page writes untrusted text
with ``textContent`` only: a tool result that contains markup is shown as text.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import asyncpg
from aiohttp import web
from aiokafka.errors import KafkaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.query.console.sessions import COOKIE, Sessions, Viewer
from services.query.console.settings import ConsoleSettings
from shared.operator.cancel import cancel_run
from shared.operator.publish import Signer
from shared.operator.resolve import NoSuchIntent, ResolutionRequest, resolve
from services.query import reads
from services.query.access import scoped
from services.query.errors import QueryError
from shared.config import Endpoints
from shared.runs import RunKey
from shared.topology import LEDGER_RESOLUTIONS

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
ASSETS = {name: "text/javascript" for name in ("console.js", "api.js", "dom.js", "runs.js",
                                                "timeline.js", "unknown.js", "health.js")}
ASSETS["console.css"] = "text/css"
PREFIX = "/console"
CSRF_HEADER = "X-CSRF-Token"
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                    "X-Frame-Options": "DENY", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class Console:
    settings: ConsoleSettings
    sessions: Sessions
    endpoints: Endpoints
    """Where the resolve form publishes, and where it reads the dispatcher's verdict."""
    pool: asyncpg.Pool
    """The query API's pool: the form checks under the viewer's access that the call is theirs."""
    resolutions_topic: str = LEDGER_RESOLUTIONS
    """Where the dispatcher reads resolutions (tests give each run its own)."""

    def viewer(self, request: web.Request) -> Viewer | None:
        """The person at the console: the OIDC proxy's header when configured, else the
        session cookie."""
        if self.settings.identity_header:
            return self.sessions.from_proxy(request.headers.get(self.settings.identity_header))
        return self.sessions.from_cookie(request.cookies.get(COOKIE))


CONSOLE = web.AppKey("console", Console)


class Login(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=500)


class CancellationForm(BaseModel):
    """What the operator types to cancel a run; who they are comes from their session."""

    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=2000)
    compensate: bool = False


class ResolutionForm(BaseModel):
    """What the operator types; who they are comes from their session."""

    model_config = ConfigDict(extra="forbid")
    outcome: Literal["succeeded", "failed"]
    reason: str = Field(min_length=1, max_length=2000)
    evidence: str = Field(min_length=1, max_length=4000)
    receipt_id: str | None = Field(default=None, max_length=200)
    result: dict[str, Any] | None = None


def add_console(app: web.Application, console: Console) -> None:
    app[CONSOLE] = console
    app.router.add_get(PREFIX, to_page)
    app.router.add_get(f"{PREFIX}/", page, allow_head=False)
    app.router.add_get(PREFIX + "/static/{name}", asset, allow_head=False)
    app.router.add_get(f"{PREFIX}/api/me", me, allow_head=False)
    app.router.add_post(f"{PREFIX}/session", sign_in)
    app.router.add_post(f"{PREFIX}/session/end", sign_out)
    app.router.add_post(PREFIX + "/api/calls/{logical_call_id}/resolution", resolution)
    app.router.add_post(PREFIX + "/api/runs/{tenant}/{run_id}/cancellation", cancellation)


@web.middleware
async def secured(request: web.Request, handler) -> web.StreamResponse:
    """Security headers on every answer, errors included (so this wraps the error handler); a
    state-changing request from another origin is refused before any handler sees it (the
    CSRF token is checked on top, per handler)."""
    if request.method == "POST" and not _same_origin(request):
        response: web.StreamResponse = web.json_response(
            {"error": {"code": "cross_origin", "message": "requests from another origin are refused"}},
            status=403)
    else:
        response = await handler(request)
    response.headers.update(SECURITY_HEADERS)
    return response


async def to_page(request: web.Request) -> web.StreamResponse:
    return web.Response(status=302, headers={"Location": f"{PREFIX}/"})


async def page(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})


async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise QueryError(404, "not_found", f"no asset {name}")
    return web.FileResponse(STATIC / name, headers={"Content-Type": f"{ASSETS[name]}; charset=utf-8"})


async def me(request: web.Request) -> web.Response:
    console = request.app[CONSOLE]
    viewer = _signed_in(request)
    return web.json_response({"operator_id": viewer.operator_id, "tenant": viewer.tenant,
                              "csrf_token": console.sessions.csrf_token(viewer),
                              "proxy": console.settings.identity_header is not None})


async def sign_in(request: web.Request) -> web.Response:
    console = request.app[CONSOLE]
    if console.settings.identity_header:
        raise QueryError(409, "signed_in_by_proxy", "this console believes its OIDC proxy only")
    login = _parsed(Login, await _json(request))
    session = console.sessions.sign_in(login.token)
    if session is None:
        raise QueryError(401, "unauthenticated", "unknown token")
    viewer, cookie = session
    response = web.json_response({"operator_id": viewer.operator_id, "tenant": viewer.tenant})
    response.set_cookie(COOKIE, cookie, max_age=int(console.settings.session_hours * 3600),
                        path="/", httponly=True, samesite="Strict", secure=True)
    log.info("console: %s signed in", viewer.operator_id)
    return response


async def sign_out(request: web.Request) -> web.Response:
    _checked_csrf(request, _signed_in(request))
    response = web.json_response({"signed_out": True})
    response.del_cookie(COOKIE, path="/")
    return response


async def resolution(request: web.Request) -> web.Response:
    """Settle a call by hand as the signed-in operator; answers the dispatcher's verdict."""
    console = request.app[CONSOLE]
    viewer = _signed_in(request)
    _checked_csrf(request, viewer)
    try:
        call_id = uuid.UUID(request.match_info["logical_call_id"])
    except ValueError:
        raise QueryError(400, "invalid_parameter", "logical_call_id: not a UUID") from None
    form = _parsed(ResolutionForm, await _json(request))
    async with scoped(console.pool, viewer.access) as conn:
        visible = await reads.get_call(conn, call_id)
    if visible is None:  # another tenant's call is as absent as a call that does not exist
        raise QueryError(404, "not_found", f"logical_call_id {call_id}")
    resolution = ResolutionRequest(call_id, form.outcome, form.reason, form.evidence,
                                   form.receipt_id or None, form.result)
    try:
        verdict = await resolve(console.endpoints, resolution, timeout_s=console.settings.resolve_timeout_s,
                                topic=console.resolutions_topic, signer=_signer_for(console, viewer))
    except NoSuchIntent as error:
        raise QueryError(404, "not_found", str(error)) from None
    except ValidationError as error:
        raise QueryError(400, "invalid_resolution", _messages(error)) from None
    except (KafkaError, OSError) as error:
        # Maybe published, maybe not: trying again is safe, a settled call refuses a resolution.
        raise QueryError(503, "unavailable", f"the resolution could not be published: {error}") from None
    log.info("console: %s resolved %s as %s: %s", viewer.operator_id, call_id, form.outcome,
             verdict["status"])
    return web.json_response(verdict)


async def cancellation(request: web.Request) -> web.Response:
    """Cancel a run as the signed-in operator; answers the dispatcher's verdict."""
    console = request.app[CONSOLE]
    viewer = _signed_in(request)
    _checked_csrf(request, viewer)
    run = RunKey(request.match_info["tenant"], request.match_info["run_id"])
    form = _parsed(CancellationForm, await _json(request))
    async with scoped(console.pool, viewer.access) as conn:
        visible = await reads.get_run(conn, run)
    if visible is None:  # another tenant's run is as absent as a run that does not exist
        raise QueryError(404, "not_found", f"run {run}")
    try:
        verdict = await cancel_run(console.endpoints, run, reason=form.reason,
                                   compensate=form.compensate, topic=console.resolutions_topic,
                                   signer=_signer_for(console, viewer),
                                   timeout_s=console.settings.resolve_timeout_s)
    except (KafkaError, OSError) as error:
        # Maybe published, maybe not: trying again is safe, a stopped run refuses it.
        raise QueryError(503, "unavailable",
                         f"the cancellation could not be published: {error}") from None
    log.info("console: %s cancelled run %s: %s", viewer.operator_id, run, verdict["status"])
    return web.json_response(verdict)


def _signer_for(console: Console, viewer: Viewer) -> Signer:
    """The console's key, naming the signed-in person: the dispatcher checks the person's roles."""
    key = console.settings.key
    assert key is not None  # nobody signs in to a console without a key (ConsoleSettings)
    return Signer(key, console.settings.principal_id, person=viewer.operator_id)


def _signed_in(request: web.Request) -> Viewer:
    viewer = request.app[CONSOLE].viewer(request)
    if viewer is None:
        raise QueryError(401, "unauthenticated", "sign in to the console")
    return viewer


def _checked_csrf(request: web.Request, viewer: Viewer) -> None:
    if not request.app[CONSOLE].sessions.csrf_valid(viewer, request.headers.get(CSRF_HEADER)):
        raise QueryError(403, "csrf", f"missing or wrong {CSRF_HEADER} header")


def _same_origin(request: web.Request) -> bool:
    """A browser names the page a POST comes from; it must be this console's origin. A
    client that sends no Origin (curl) still needs the CSRF token of a session."""
    origin = request.headers.get("Origin")
    host = request.headers.get("X-Forwarded-Host", request.host)  # behind a reverse proxy
    return origin is None or origin == f"{_scheme(request)}://{host}"


def _scheme(request: web.Request) -> str:
    return request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise QueryError(400, "invalid_body", "the body must be JSON") from None


def _parsed(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise QueryError(400, "invalid_body", _messages(error)) from None


def _messages(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors())
