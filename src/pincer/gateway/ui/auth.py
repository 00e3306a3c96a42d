"""Sign-in for the dashboard: a gateway token exchanged for a session cookie, and CSRF.

A browser cannot hold our bearer token the way a client does, so ``/ui/login`` takes it once (a
form field labelled "Token", posted as ``token``) and answers with a session cookie: random,
HttpOnly, ``SameSite=Strict``, ``Secure`` when served over https, scoped to ``/ui``. The server
keeps the session in the store (never the token: its sha256, so removing the token from
config.toml ends the sign-in at once; never the cookie: its sha256), so every gateway of one store
accepts it and a restart keeps it; it expires after ``UI_SESSION_IDLE_S`` without use or ``UI_SESSION_TTL_S``
in all. Every form carries the session's CSRF token in a hidden ``csrf_token`` field; the login
form's is bound to a short-lived cookie of its own (a login CSRF would sign a person in as
someone else). A wrong token is counted where the guard counts wrong bearer tokens
(``GET /api/v1/metrics``) and toward the gateway's per-address failure limit (the window the
webhooks use, ``[triggers] max_failures_per_minute``): past it, sign-in answers 429.

The API other pages use (the canvas pages too), stable::

    identity = await require_identity(request)     # UiIdentity; raises SignInRequired -> 303 /ui/login
    identity = await current_identity(request)     # UiIdentity | None, never raises
    form = await read_form(request)          # dict[str, str], bounded; FormRefused -> 4xx page
    pairs = await read_form_pairs(request)   # the same, every (name, value) in order (checkboxes)
    require_csrf(identity, form)             # raises CsrfRefused -> 403, nothing changed

``identity.session`` is the :class:`~pincer.gateway.tokens.GatewaySession` of the token that
signed in (main, or a non-main session that sees only its own things, as on REST).
``SignInRequired``, ``CsrfRefused`` and ``FormRefused`` are answered by the dashboard app's
exception handlers (:func:`exception_handlers`); an app of its own mounted under ``/ui`` adds
those handlers too.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pincer.core.acts import Actor
from pincer.gateway.access import may_manage_people
from pincer.gateway.refusals import UnauthenticatedRefusals
from pincer.gateway.tokens import GatewaySession, TokenBook, token_digest
from pincer.gateway.ui.services import services_of
from pincer.store.sign_ins import SignIn, SignInStore, sign_in_key
from pincer.triggers.failures import FailureWindow

logger = logging.getLogger(__name__)

__all__ = [
    "UI_PREFIX", "UI_AUTH_SCOPE_KEY", "SESSION_COOKIE", "LOGIN_COOKIE", "UI_SESSION_TTL_S", "UI_SESSION_IDLE_S",
    "UI_MAX_FORM_BYTES", "UiIdentity", "UiAuth", "SignInRequired", "CsrfRefused", "FormRefused", "QueryRefused",
    "current_identity", "resolved_identity", "require_identity", "read_form", "read_form_pairs", "require_csrf", "exception_handlers", "with_ui_auth",
    "redirect_bare_prefix",
]  # fmt: skip

UI_PREFIX = "/ui"
UI_AUTH_SCOPE_KEY = "pincer.ui_auth"
_IDENTITY_SCOPE_KEY = "pincer.ui_identity"  # this request's sign-in, once read from the store
SESSION_COOKIE = "pincer_ui"
LOGIN_COOKIE = "pincer_ui_login"
UI_SESSION_TTL_S = 8 * 3600.0  # a sign-in lasts a working day at most
UI_SESSION_IDLE_S = 3600.0  # and ends after an hour nobody used it
LOGIN_FORM_TTL_S = 1800.0  # a login form's CSRF cookie
MAX_UI_SESSIONS = 1_024  # sign-ins kept; past it the least recently used ends
TOUCH_EVERY_S = 30.0  # how stale a sign-in's recorded last use may get before a use is written
MAX_COOKIE_CHARS = 128  # ours are 43; anything longer is not one of them and is not looked up
UI_MAX_FORM_BYTES = 65_536  # a dashboard form is a few fields; the guard does not bound /ui bodies
_NEXT_PATH = re.compile(r"^/ui(/[A-Za-z0-9_./\-]*)?$")


@dataclass(frozen=True, kw_only=True, slots=True)
class UiIdentity:
    """Who is signed in: the gateway session of their token, and this sign-in's CSRF token."""

    session: GatewaySession
    csrf_token: str
    expires_at: float

    @property
    def is_main(self) -> bool:
        return self.session.is_main

    @property
    def name(self) -> str:
        return self.session.name

    @property
    def manages_people(self) -> bool:
        """Whether the people page is theirs (the menu shows it; every route asks again)."""
        return may_manage_people(self.session)

    @property
    def actor(self) -> Actor:
        """Who this sign-in's acts are recorded as: ``ui:<session>`` (``ui:<person>`` for a person's)."""
        return self.session.actor("ui")


class SignInRequired(Exception):
    """No valid sign-in: answered with 303 to ``/ui/login`` (``next`` says where to come back)."""

    def __init__(self, next_path: str = UI_PREFIX + "/") -> None:
        self.next_path = next_path


class CsrfRefused(Exception):
    """A form post without this sign-in's ``csrf_token``: 403, nothing done."""


class FormRefused(Exception):
    """A form body the dashboard will not read (too large, not a form)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


class QueryRefused(Exception):
    """A page's query parameter the dashboard will not act on (out of range, not a number); the
    message names the parameter."""

    def __init__(self, message: str) -> None:
        self.message = message


class UiAuth:
    """The dashboard's sign-ins, kept in the store (:mod:`pincer.store.sign_ins`): every gateway
    of one store knows each of them, and a restart keeps them."""

    def __init__(
        self,
        *,
        tokens: TokenBook,
        store: SignInStore,
        refusals: UnauthenticatedRefusals,
        failures: FailureWindow,
        max_failures: Callable[[], int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens = tokens
        self.store = store
        self.refusals = refusals
        self.failures = failures
        self._max_failures = max_failures
        self._clock = clock

    # -- sessions ----------------------------------------------------------------------------

    async def identity(self, cookie: str | None, *, touch: bool = True) -> UiIdentity | None:
        """The sign-in of ``cookie``, if it holds. ``touch`` False looks without counting as use
        (an open page's event stream checks its sign-in without keeping it alive)."""
        if not cookie or len(cookie) > MAX_COOKIE_CHARS:
            return None
        key = sign_in_key(cookie)
        entry = await self.store.get(key)
        if entry is None:
            return None
        now = self._clock()
        if now - entry.created >= UI_SESSION_TTL_S or now - entry.last_used >= UI_SESSION_IDLE_S:
            await self.store.remove(key)
            return None
        session = await self.tokens.resolve_digest(entry.token_digest)
        if session is None:  # the token was removed from config.toml
            await self.store.remove(key)
            return None
        last_used = entry.last_used
        # A use is written at most every TOUCH_EVERY_S: a page's requests do not each cost a write,
        # and the idle time is still kept to within that much.
        if touch and now - last_used >= TOUCH_EVERY_S:
            await self.store.touch(key, now)
            last_used = now
        expires = min(entry.created + UI_SESSION_TTL_S, last_used + UI_SESSION_IDLE_S)
        return UiIdentity(session=session, csrf_token=entry.csrf, expires_at=expires)

    async def sign_in(self, token: str) -> tuple[str, UiIdentity] | None:
        """A new sign-in for ``token`` (its cookie value and identity), or None for a wrong one."""
        session = await self.tokens.resolve(token)
        if session is None:
            return None
        now = self._clock()
        cookie = secrets.token_urlsafe(32)
        entry = SignIn(token_digest=token_digest(token), csrf=secrets.token_urlsafe(32), created=now, last_used=now)
        await self.store.prune(created_before=now - UI_SESSION_TTL_S, used_before=now - UI_SESSION_IDLE_S,
                               keep=MAX_UI_SESSIONS - 1)  # fmt: skip
        await self.store.add(sign_in_key(cookie), entry)
        return cookie, UiIdentity(session=session, csrf_token=entry.csrf, expires_at=now + UI_SESSION_IDLE_S)

    async def sign_out(self, cookie: str | None) -> None:
        if cookie and len(cookie) <= MAX_COOKIE_CHARS:
            await self.store.remove(sign_in_key(cookie))

    # -- failures ----------------------------------------------------------------------------

    def retry_after(self, address: str) -> float | None:
        return self.failures.retry_after(address)

    def failed(self, address: str, path: str) -> None:
        self.failures.record(address)
        self.refusals.record(address=address, method="POST", path=path, code="ui_sign_in_failed")

    @property
    def max_failures(self) -> int:
        return self._max_failures()


def with_ui_auth(app: ASGIApp, auth: UiAuth) -> ASGIApp:
    """``app`` with ``auth`` in every request's scope (what :func:`current_identity` reads)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        scope[UI_AUTH_SCOPE_KEY] = auth
        await app(scope, receive, send)

    return wrapped


def auth_of(request: Request) -> UiAuth:
    auth = request.scope.get(UI_AUTH_SCOPE_KEY)
    if not isinstance(auth, UiAuth):
        raise RuntimeError("the dashboard's sign-in is not installed here (wrap the app with with_ui_auth)")
    return auth


async def current_identity(request: Request, *, touch: bool = True) -> UiIdentity | None:
    """The signed-in identity of this request, or None (``touch``: see :meth:`UiAuth.identity`).
    Read from the store once per request; the page rendered for it reads it again for free
    (:func:`resolved_identity`)."""
    if _IDENTITY_SCOPE_KEY in request.scope:
        found: UiIdentity | None = request.scope[_IDENTITY_SCOPE_KEY]
        return found
    auth = request.scope.get(UI_AUTH_SCOPE_KEY)
    identity = await auth.identity(request.cookies.get(SESSION_COOKIE), touch=touch) if isinstance(auth, UiAuth) else None
    request.scope[_IDENTITY_SCOPE_KEY] = identity
    return identity


def resolved_identity(request: Request) -> UiIdentity | None:
    """The identity :func:`current_identity` read for this request (None before it did)."""
    found: UiIdentity | None = request.scope.get(_IDENTITY_SCOPE_KEY)
    return found


async def require_identity(request: Request) -> UiIdentity:
    """The signed-in identity; :class:`SignInRequired` (a 303 to the login page) when there is none."""
    identity = await current_identity(request)
    if identity is None:
        path = request.url.path
        raise SignInRequired(path if _NEXT_PATH.match(path) else UI_PREFIX + "/")
    return identity


async def read_form_pairs(request: Request, *, max_bytes: int = UI_MAX_FORM_BYTES) -> list[tuple[str, str]]:
    """A urlencoded form body as its (name, value) pairs in order, read up to ``max_bytes`` (the
    guard leaves ``/ui`` bodies to us): for fields that repeat (checkboxes)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise FormRefused(415, "the dashboard takes forms (application/x-www-form-urlencoded) only")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise FormRefused(413, f"the form is larger than {max_bytes} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > max_bytes:
            raise FormRefused(413, f"the form is larger than {max_bytes} bytes")
    try:
        return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=200)
    except ValueError:  # more fields than max_num_fields
        raise FormRefused(413, "the form has more than 200 fields") from None


async def read_form(request: Request, *, max_bytes: int = UI_MAX_FORM_BYTES) -> dict[str, str]:
    """A urlencoded form body, read up to ``max_bytes``; a repeated field keeps its first value."""
    form: dict[str, str] = {}
    for key, value in await read_form_pairs(request, max_bytes=max_bytes):
        form.setdefault(key, value)
    return form


def require_csrf(identity: UiIdentity, form: Mapping[str, str]) -> None:
    """:class:`CsrfRefused` unless the form carries this sign-in's CSRF token."""
    presented = form.get("csrf_token", "")
    if not presented or not hmac.compare_digest(presented.encode(), identity.csrf_token.encode()):
        raise CsrfRefused()


def is_https(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, cookie: str) -> None:
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=int(UI_SESSION_TTL_S), path=UI_PREFIX, httponly=True,
        samesite="strict", secure=is_https(request),
    )  # fmt: skip


# -- the login and logout routes ---------------------------------------------------------------


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "(unknown address)"


def _login_page(request: Request, *, error: str | None, status: int, next_path: str) -> Response:
    pages = request.app.state.pages  # render.Pages (which imports this module)
    login_csrf = secrets.token_urlsafe(32)
    auth = services_of(request).config().auth
    providers = [(name, p.label or name) for name, p in auth.oidc.items()]
    context = {"error": error, "login_csrf": login_csrf, "next": next_path, "providers": providers,
               "token_sign_in": auth.token_sign_in}  # fmt: skip
    response: Response = pages.render(request, "login.html", context, status=status)
    response.set_cookie(
        LOGIN_COOKIE, login_csrf, max_age=int(LOGIN_FORM_TTL_S), path=UI_PREFIX + "/login", httponly=True,
        samesite="strict", secure=is_https(request),
    )  # fmt: skip
    return response


def next_of(value: str | None) -> str:
    fits = value and _NEXT_PATH.match(value) and "//" not in value and ".." not in value
    return value if fits and value else UI_PREFIX + "/"


async def login_form(request: Request) -> Response:
    if await current_identity(request) is not None:
        return RedirectResponse(next_of(request.query_params.get("next")), status_code=303)
    return _login_page(request, error=None, status=200, next_path=next_of(request.query_params.get("next")))


async def login(request: Request) -> Response:
    auth = auth_of(request)
    form = await read_form(request)
    next_path = next_of(form.get("next"))
    address = _client_address(request)
    wait = auth.retry_after(address)
    if wait is not None:
        auth.refusals.record(address=address, method="POST", path=request.url.path, code="too_many_failures")
        seconds = max(1, int(wait + 0.999))
        return _login_page(
            request, status=429, next_path=next_path,
            error=f"{auth.max_failures} failed sign-ins from {address} within a minute; try again in {seconds} s",
        )  # fmt: skip
    presented = request.cookies.get(LOGIN_COOKIE, "")
    sent = form.get("csrf_token", "")
    if not presented or not sent or not hmac.compare_digest(presented.encode(), sent.encode()):
        return _login_page(
            request, status=403, next_path=next_path,
            error="this sign-in form is stale or came from elsewhere; sign in again from this page",
        )  # fmt: skip
    if not services_of(request).config().auth.token_sign_in:
        return _login_page(
            request, status=403, next_path=next_path,
            error="signing in with a token is turned off here ([auth] token_sign_in = false); use single sign-on",
        )  # fmt: skip
    token = form.get("token", "").strip()
    made = await auth.sign_in(token) if token else None
    if made is None:
        auth.failed(address, request.url.path)
        return _login_page(
            request, status=401, next_path=next_path,
            error="wrong token; `pincer token` prints the gateway's token" if token else "enter a token",
        )  # fmt: skip
    cookie, identity = made
    logger.info("dashboard sign-in for %s from %s", identity.actor, address)
    response = RedirectResponse(next_path, status_code=303)
    set_session_cookie(response, request, cookie)
    response.delete_cookie(LOGIN_COOKIE, path=UI_PREFIX + "/login", httponly=True, samesite="strict")
    return response


async def logout(request: Request) -> Response:
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    await auth_of(request).sign_out(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse(UI_PREFIX + "/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=UI_PREFIX, httponly=True, samesite="strict")
    return response


# -- answers to the exceptions above -----------------------------------------------------------


def _plain_page(status: int, title: str, message: str) -> HTMLResponse:
    from html import escape

    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<link rel="stylesheet" href="{UI_PREFIX}/static/dashboard.css"></head><body><main>'
        f'<h1>{escape(title)}</h1><p>{escape(message)}</p><p><a href="{UI_PREFIX}/">Back to the dashboard</a></p>'
        "</main></body></html>"
    )
    return HTMLResponse(body, status_code=status)


async def _sign_in_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    target = UI_PREFIX + "/login"
    if exc.next_path != UI_PREFIX + "/":
        target += "?next=" + quote(exc.next_path, safe="/")
    return RedirectResponse(target, status_code=303)


async def _csrf_refused(request: Request, exc: Exception) -> Response:
    return _plain_page(
        403, "Form refused", "the form came without this sign-in's csrf_token; reload the page and send it again"
    )


async def _form_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, FormRefused)
    return _plain_page(exc.status, "Form refused", exc.message)


async def _query_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, QueryRefused)
    return _plain_page(400, "Address refused", exc.message)


def exception_handlers() -> dict[Any, Callable[..., Any]]:
    """The handlers that turn this module's exceptions into answers, for a Starlette app."""
    return {SignInRequired: _sign_in_required, CsrfRefused: _csrf_refused, FormRefused: _form_refused,
            QueryRefused: _query_refused}  # fmt: skip


async def _to_overview(request: Request) -> Response:
    return RedirectResponse(UI_PREFIX + "/", status_code=303)


def redirect_bare_prefix() -> Route:
    """``/ui`` itself (no slash) goes to the overview."""
    return Route(UI_PREFIX, _to_overview, methods=["GET"])
