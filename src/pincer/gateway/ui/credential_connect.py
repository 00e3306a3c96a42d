"""A person connects their own OAuth login on the dashboard: the **Connect** button of
``/ui/credentials`` for a per-person secret that is a built-in's OAuth token (``google_oauth_token``,
``slack_bot_token``, ``github_token``: builtins/oauth.py's providers) whose OAuth client is set up.

``POST /ui/credentials/NAME/connect`` (the sign-in's CSRF token; a person's sign-in) begins the
provider's authorization code flow with PKCE (S256) and a fresh ``state``, and sends the browser
to the provider; the provider sends it back to ``GET /ui/credentials/oauth/LOGIN/callback``,
where the code is traded (with the verifier) and both tokens are stored as the person's own
values, the ones a call on their behalf injects and refreshes (docs/teams.md).

Whose it is: the person signed in when the login began, never a person a form field or the
callback's URL names. The login begun is kept in the store of pending sign-ins
(store/oidc_logins.py, by the sha256 of its state, for ten minutes, so any gateway of the store
finishes it) under the provider ``credential:LOGIN``; this flow has no id_token, so the row's
nonce holds the person and its next path the session their acts are filed under. The state is
bound to the browser that began it, as the sign-in's is (gateway/ui/oidc.py): a cookie
(``pincer_connect_state``, HttpOnly, SameSite=Lax, on ``/ui/credentials/``), and a callback whose
state this browser does not hold is refused, as is a state taken already (a replay), one begun
for another login, and a callback in a browser signed in as someone else.
"""

from __future__ import annotations

import hmac
import logging
import time
from html import escape
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from pincer.core.acts import Actor
from pincer.core.errors import PincerError, UsageError
from pincer.gateway.ui.auth import UI_PREFIX, current_identity, is_https, read_form, require_csrf, require_identity
from pincer.gateway.ui.refusal import refusal_page
from pincer.gateway.ui.services import services_of
from pincer.store.oidc_logins import PendingLogin
from pincer.store.people_acts import record_own_credential, require_per_person

__all__ = ["routes", "connectable", "STATE_COOKIE"]

logger = logging.getLogger(__name__)

STATE_COOKIE = "pincer_connect_state"
PENDING_TTL_S = 600.0
_KIND = "credential:"
_COOKIE_PATH = f"{UI_PREFIX}/credentials/"


def connectable(request: Request, names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The per-person secrets that are a built-in's OAuth token whose OAuth client an operator set
    up here (no dead button): name -> the provider's display name."""
    from pincer.builtins.oauth import login_for_secret

    services = services_of(request)
    settings = services.config().builtins
    found = {}
    for name in names:
        provider = login_for_secret(name, settings)
        if provider is not None and services.secrets.find(provider.client_id_secret):
            found[name] = provider.display_name
    return found


def _callback_url(request: Request, login: str) -> str:
    return str(request.url.replace(path=f"{UI_PREFIX}/credentials/oauth/{quote(login, safe='')}/callback",
                                   query="", fragment=""))  # fmt: skip


def _refused(status: int, message: str) -> HTMLResponse:
    return refusal_page(status, message, title="Not connected", back="/credentials", back_text="Back to your credentials")


async def connect(request: Request) -> Response:
    """Begin the person's own login: CSRF, a person, a per-person name that is a login's token."""
    from pincer.builtins.oauth import begin_login, login_for_secret, login_scopes

    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    person = identity.session.person
    if person is None:
        return _refused(403, "credentials are a person's own: this sign-in (the gateway's shared token) is nobody's")
    services = services_of(request)
    config = services.config()
    name = request.path_params["name"]
    try:
        require_per_person(name, config.secrets.per_person)
        provider = login_for_secret(name, config.builtins)
        if provider is None:
            raise UsageError(f"secret {name!r} is no built-in's OAuth token", hint="paste your value in its form instead")
        client_id = services.secrets.find(provider.client_id_secret)
        if not client_id:
            raise UsageError(f"{provider.display_name}'s OAuth client is not set up here",
                             hint=f"an operator stores it: `pincer secrets set {provider.client_id_secret}` (and "
                             f"{provider.client_secret_secret}); docs/teams.md")  # fmt: skip
        start = begin_login(provider, client_id=client_id, scopes=login_scopes(provider.name, config.builtins),
                            redirect_uri=_callback_url(request, provider.name))  # fmt: skip
    except PincerError as exc:
        return _refused(400, f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
    now = time.time()
    pending = PendingLogin(provider=_KIND + provider.name, nonce=person, verifier=start.code_verifier,
                           next_path=identity.session.name, created=now)  # fmt: skip
    await services.oidc_logins.add(start.state, pending, forget_before=now - PENDING_TTL_S)
    logger.info("%s began connecting their own %s login", person, provider.name)
    # A page that goes on to the provider, not a 303: the dashboard's CSP (form-action 'self')
    # binds the redirects that follow a form's submission, and the provider is another origin.
    target = escape(start.url, quote=True)
    response = HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
        f'<title>Connecting</title></head><body><p>On to {escape(provider.display_name)} to connect your own login. '
        f'<a id="provider" href="{target}">Continue</a></p></body></html>'
    )
    response.set_cookie(STATE_COOKIE, start.state, max_age=int(PENDING_TTL_S), path=_COOKIE_PATH, httponly=True,
                        samesite="lax", secure=is_https(request))  # fmt: skip
    return response


async def callback(request: Request) -> Response:
    """Finish it: this browser's state, taken once, for this login; the tokens stored as the
    person's who began it."""
    from pincer.builtins.oauth import LoginStart, exchange_code, provider_for

    login = request.path_params["login"]
    params = request.query_params
    state = params.get("state", "")
    if not state or not hmac.compare_digest(request.cookies.get(STATE_COOKIE, "").encode(), state.encode()):
        # Not taken: the browser that began it may still finish it.
        return _refused(400, "this connection was begun in another browser (or this one lost its cookie); connect again here")
    services = services_of(request)
    pending = await services.oidc_logins.take(state)
    if pending is None or pending.provider != _KIND + login or pending.created < time.time() - PENDING_TTL_S:
        return _refused(400, "this connection was not begun here, took too long, or was finished already; connect again")
    person = pending.nonce
    identity = await current_identity(request)
    if identity is not None and identity.session.person != person:
        return _refused(403, "this connection was begun by another person than the one signed in here; connect again")
    if params.get("error"):
        return _refused(401, f"the provider said no: {params.get('error', '')[:100]}")
    config = services.config()
    provider = provider_for(login, config.builtins)
    try:
        require_per_person(provider.access_secret, config.secrets.per_person)
        if await services.people.get(person) is None:
            raise UsageError(f"{person} is no longer a person here", hint="an admin adds them again with `pincer people add`")
        code = params.get("code", "")
        if not code:
            raise UsageError("the provider sent no code", hint="connect again and consent to the scopes shown")
        client_id = services.secrets.find(provider.client_id_secret) or ""
        start = LoginStart(provider=provider.name, url="", state=state, code_verifier=pending.verifier,
                           redirect_uri=_callback_url(request, login), scopes=())  # fmt: skip
        had = services.secrets.find_for(person, provider.access_secret) is not None
        await exchange_code(provider, start, code, client_id=client_id,
                            client_secret=services.secrets.find(provider.client_secret_secret),
                            store=services.secrets, home=services.home,
                            allow_private_network=config.allow_private_network, person=person)  # fmt: skip
    except PincerError as exc:
        logger.warning("%s's %s connection refused: %s", person, login, exc.message)
        return _refused(400, f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
    actor = Actor(channel="ui", principal=person, session_name=pending.next_path)
    await record_own_credential(services.audit, actor=actor, person=person, name=provider.access_secret,
                                outcome="replaced" if had else "set", what=f" (their own {provider.display_name} login)")  # fmt: skip
    logger.info("%s connected their own %s login", person, login)
    # A page, not a redirect: the next request is a same-site navigation, which carries the
    # sign-in's SameSite=Strict cookie (a redirect chain begun at the provider would not).
    target = f"{UI_PREFIX}/credentials?done=connected"
    response = HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
        f'<title>Connected</title></head><body><p>{escape(provider.display_name)} connected as {escape(person)}\'s own. '
        f'<a href="{target}">Continue</a></p></body></html>'
    )
    response.delete_cookie(STATE_COOKIE, path=_COOKIE_PATH)
    return response


def routes() -> list[Route]:
    return [
        Route("/credentials/{name:str}/connect", connect, methods=["POST"]),
        Route("/credentials/oauth/{login:str}/callback", callback, methods=["GET"]),
    ]
