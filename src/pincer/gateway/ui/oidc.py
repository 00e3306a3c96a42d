"""Single sign-on for the dashboard: OpenID Connect, or GitHub's OAuth, authorization code with PKCE.

``GET /ui/login/oidc/NAME`` sends the browser to ``[auth.oidc.NAME]``'s provider (found through
its discovery document) with a fresh ``state``, ``nonce`` and PKCE verifier (S256); the provider
sends it back to ``GET /ui/oidc/NAME/callback``, where the state is taken (once: a replayed
callback finds nothing), the code exchanged at the token endpoint with the verifier, and the
``id_token`` checked with joserfc: its signature against the provider's JWKS (fetched again once
for a key id it does not know), its issuer, its audience (and ``azp`` when it names several), its
expiry and issue time, its nonce, and its ``at_hash`` when it has one (OIDC Core 3.1.3.6: the
access token of the same token response, hashed with the id_token's algorithm's hash, left half,
base64url; a mismatch is an id_token spliced onto an answer it was not issued with). A token that
fails any check signs nobody in.

``kind = "github"`` goes through the same two routes, state, PKCE and person mapping; only the
authorize URL and what the code is traded for differ (gateway/ui/github_sign_in.py: no id_token,
the verified primary email and the org and team memberships from GitHub's REST API).

The state is bound to the browser that began the login: ``start`` sets it in a cookie (HttpOnly,
SameSite=Lax so the provider's redirect back carries it, path the callbacks'), and the callback
refuses a state its browser does not hold, so a callback URL begun by someone else (login CSRF:
signing a victim in as the attacker) signs nobody in.

Who it is: the person whose record has the token's verified email (their roles are the ones the
CLI gave them), else a person this provider's rules give roles to (``group_roles``,
``domain_roles``, ``email_roles`` of ``[auth.oidc.NAME]``), kept as a person made by single sign-on, whose roles the rules
set anew at each sign-in. No role: no sign-in. The sign-in then holds a personal access token of
the person's that lives as long as the sign-in may (store/people.py), so removing the person or
revoking the token ends it on every gateway of the store.

The logins begun and not yet finished are kept in the store for ten minutes (store/oidc_logins.py,
by the sha256 of their state): a login begun on one gateway finishes on any gateway of the store.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from pincer.core.errors import PincerError, UsageError
from pincer.core.extras import require
from pincer.gateway.ui import github_sign_in
from pincer.gateway.ui.auth import UI_PREFIX, UI_SESSION_TTL_S, is_https, set_session_cookie
from pincer.gateway.ui.refusal import refusal_page
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.policy.roles import parse_roles
from pincer.store.oidc_logins import OidcLoginStore, PendingLogin

if TYPE_CHECKING:
    from pincer.config import OidcProvider

logger = logging.getLogger(__name__)

__all__ = ["OidcLogins", "routes", "IdTokenRefused"]

PENDING_TTL_S = 600.0
LEEWAY_S = 60  # clock skew allowed on exp, iat and nbf
HTTP_TIMEOUT_S = 15.0
STATE_COOKIE = "pincer_sso_state"
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")

# The hash of each alg of ALGORITHMS, for at_hash (OIDC Core 3.1.3.6; EdDSA is Ed25519's SHA-512).
_AT_HASH_DIGESTS = {alg: "sha" + alg[2:] for alg in ALGORITHMS if alg != "EdDSA"} | {"EdDSA": "sha512"}


class IdTokenRefused(Exception):
    """An id_token (or the exchange that should have brought one) that signs nobody in."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SignedInAs:
    person: str
    email: str


class OidcLogins:
    """What this gateway knows of each provider (discovery, keys); the logins begun and not yet
    finished are in the store (store/oidc_logins.py), so any gateway of it finishes one."""

    def __init__(self, *, clock: Any = time.time) -> None:
        self._discovery: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, Any] = {}
        self._clock = clock

    async def begin(self, store: OidcLoginStore, provider: str, next_path: str) -> tuple[str, PendingLogin]:
        now = self._clock()
        state = secrets.token_urlsafe(32)
        pending = PendingLogin(provider=provider, nonce=secrets.token_urlsafe(32), verifier=secrets.token_urlsafe(48),
                               next_path=next_path, created=now)  # fmt: skip
        await store.add(state, pending, forget_before=now - PENDING_TTL_S)
        return state, pending

    async def take(self, store: OidcLoginStore, state: str, provider: str) -> PendingLogin | None:
        """The login ``state`` began, once; None for one never begun, expired, taken, or another provider's."""
        pending = await store.take(state) if state else None
        if pending is None or pending.provider != provider or pending.created < self._clock() - PENDING_TTL_S:
            return None
        return pending

    async def discovery(self, config: OidcProvider, http: httpx.AsyncClient) -> dict[str, Any]:
        issuer = config.issuer or ""  # set for every kind = "oidc" (config.py)
        found = self._discovery.get(issuer)
        if found is None:
            url = issuer.rstrip("/") + "/.well-known/openid-configuration"
            found = _json_object(await http.get(url), "the discovery document")
            if found.get("issuer") != issuer:
                raise IdTokenRefused(f"the discovery document names issuer {str(found.get('issuer'))[:200]!r}, not {issuer!r}")
            for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(found.get(key), str):
                    raise IdTokenRefused(f"the discovery document has no {key}")
            self._discovery[issuer] = found
        return found

    async def _key_set(self, config: OidcProvider, http: httpx.AsyncClient, *, fresh: bool) -> Any:
        key_set = require("oauth", "joserfc.jwk").KeySet
        keys = None if fresh else self._keys.get(config.issuer or "")
        if keys is None:
            document = await self.discovery(config, http)
            keys = key_set.import_key_set(_json_object(await http.get(document["jwks_uri"]), "the JWKS"))
            self._keys[config.issuer or ""] = keys
        return keys

    async def verify(
        self, id_token: str, config: OidcProvider, nonce: str, http: httpx.AsyncClient, *, access_token: str | None
    ) -> dict[str, Any]:
        """The claims of an id_token that passes every check; IdTokenRefused naming the first that fails."""
        jwt = require("oauth", "joserfc.jwt")
        JoseError = require("oauth", "joserfc.errors").JoseError

        try:
            try:
                token = jwt.decode(id_token, await self._key_set(config, http, fresh=False), algorithms=list(ALGORITHMS))
            except JoseError:
                # A key rotated in since the keys were fetched: fetch them once more, then refuse.
                token = jwt.decode(id_token, await self._key_set(config, http, fresh=True), algorithms=list(ALGORITHMS))
        except (JoseError, ValueError) as exc:
            raise IdTokenRefused(f"the id_token's signature does not hold ({type(exc).__name__})") from None
        claims = dict(token.claims)
        registry = jwt.JWTClaimsRegistry(
            now=int(self._clock()), leeway=LEEWAY_S,
            iss={"essential": True, "value": config.issuer}, aud={"essential": True, "value": config.client_id},
            exp={"essential": True}, iat={"essential": True}, sub={"essential": True},
            nonce={"essential": True, "value": nonce},
        )  # fmt: skip
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise IdTokenRefused(f"the id_token was refused: {exc.error} {getattr(exc, 'claim', '') or ''}".strip()) from None
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != config.client_id:
            raise IdTokenRefused("the id_token names several audiences and another authorized party")
        _check_at_hash(claims, str(token.header.get("alg", "")), access_token)
        return claims


def _check_at_hash(claims: dict[str, Any], alg: str, access_token: str | None) -> None:
    """Fail closed when the id_token's at_hash is not the access token's (OIDC Core 3.1.3.6); an
    id_token without at_hash is not checked (the code flow makes it optional)."""
    if "at_hash" not in claims:
        return
    said = claims["at_hash"]
    if not isinstance(said, str) or not access_token:
        raise IdTokenRefused("the id_token's at_hash cannot be checked: the token endpoint sent no access_token with it")
    hash_name = _AT_HASH_DIGESTS.get(alg)
    # ASCII per the spec: a token that is not ASCII matches no at_hash; nor does an unknown alg.
    expected = b""
    if hash_name is not None and access_token.isascii():
        digest = hashlib.new(hash_name, access_token.encode("ascii")).digest()
        expected = base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=")
    if not expected or not hmac.compare_digest(expected, said.encode("ascii", "replace")):
        raise IdTokenRefused("the id_token's at_hash does not match the access token it came with; sign in again")


def _json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise IdTokenRefused(f"{what} answered HTTP {response.status_code}")
    try:
        value = response.json()
    except ValueError:
        raise IdTokenRefused(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise IdTokenRefused(f"{what} is not a JSON object")
    return value


def _logins(request: Request) -> OidcLogins:
    app = request.app
    logins = getattr(app.state, "oidc", None)
    if logins is None:
        logins = app.state.oidc = OidcLogins()
    return logins


def _provider(request: Request) -> tuple[str, OidcProvider] | None:
    name = request.path_params["provider"]
    config = services_of(request).config().auth.oidc.get(name)
    return (name, config) if config is not None else None


def _callback_url(request: Request, name: str) -> str:
    # Built from the request's own URL: the dashboard is mounted (lazily) where url_for cannot see.
    return str(request.url.replace(path=f"{UI_PREFIX}/oidc/{quote(name, safe='')}/callback", query="", fragment=""))


def _refused(status: int, message: str) -> HTMLResponse:
    return refusal_page(status, message, title="Sign-in refused", back="/login", back_text="Back to sign-in")


async def start(request: Request) -> Response:
    from pincer.gateway.ui.auth import next_of


    found = _provider(request)
    if found is None:
        return _refused(404, f"no single sign-on provider {request.path_params['provider']!r} in [auth.oidc]")
    name, config = found
    try:
        create_s256_code_challenge = require("oauth", "authlib.oauth2.rfc7636").create_s256_code_challenge
        if config.kind == "oidc":
            require("oauth", "joserfc")
    except PincerError as exc:
        return _refused(503, f"{exc.message} ({exc.hint})")
    logins = _logins(request)
    document: dict[str, Any] = {}
    if config.kind == "oidc":
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
                document = await logins.discovery(config, http)
        except (IdTokenRefused, httpx.HTTPError) as exc:
            logger.warning("single sign-on %s: the provider's discovery failed: %s", name, exc)
            return _refused(502, f"the provider {name!r} could not be reached or answered wrongly")
    state, pending = await logins.begin(services_of(request).oidc_logins, name, next_of(request.query_params.get("next")))
    challenge = create_s256_code_challenge(pending.verifier)
    if config.kind == "github":
        target = github_sign_in.authorize_url(config, redirect_uri=_callback_url(request, name), state=state, challenge=challenge)
    else:
        query = urlencode({
            "response_type": "code", "client_id": config.client_id, "redirect_uri": _callback_url(request, name),
            "scope": " ".join(config.scope_list()), "state": state, "nonce": pending.nonce,
            "code_challenge": challenge, "code_challenge_method": "S256",
        })  # fmt: skip
        endpoint = document["authorization_endpoint"]
        target = f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        STATE_COOKIE, state, max_age=int(PENDING_TTL_S), path=f"{UI_PREFIX}/oidc/", httponly=True, samesite="lax",
        secure=is_https(request),
    )  # fmt: skip
    return response


async def callback(request: Request) -> Response:
    from pincer.gateway.ui.auth import auth_of

    found = _provider(request)
    if found is None:
        return _refused(404, f"no single sign-on provider {request.path_params['provider']!r} in [auth.oidc]")
    name, config = found
    params = request.query_params
    if params.get("error"):
        return _refused(401, f"the provider said no: {params.get('error', '')[:100]}")
    state = params.get("state", "")
    if not state or not hmac.compare_digest(request.cookies.get(STATE_COOKIE, "").encode(), state.encode()):
        # Not taken: the browser that began it may still finish it.
        return _refused(400, "this sign-in was begun in another browser (or this one lost its cookie); sign in again here")
    pending = await _logins(request).take(services_of(request).oidc_logins, state, name)
    if pending is None:
        return _refused(400, "this sign-in was not begun here, took too long, or was finished already; sign in again")
    services = services_of(request)
    try:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
            if config.kind == "github":
                email, groups = await _github_identity(request, http, name, config, pending, params.get("code", ""))
            else:
                email, groups = _oidc_identity(config, await _exchange(request, http, name, config, pending, params.get("code", "")))
        who = await _person_of(services, name, config, email, groups)
    except (IdTokenRefused, github_sign_in.GitHubRefused) as exc:
        logger.warning("single sign-on %s refused: %s", name, exc)
        return _refused(401, str(exc))
    except httpx.HTTPError as exc:
        logger.warning("single sign-on %s: the provider could not be reached: %s", name, type(exc).__name__)
        return _refused(502, f"the provider {name!r} could not be reached")
    except PincerError as exc:
        return _refused(403, f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
    now = time.time()
    made = await services.people.new_token(who.person, now=now, expires_at=now + UI_SESSION_TTL_S)
    signed = await auth_of(request).sign_in(made.value)
    if signed is None:  # the person was removed between the two steps
        return _refused(403, f"{who.person} may not sign in")
    cookie, _identity = signed
    logger.info("dashboard sign-in of %s through %s", who.person, name)
    # A page, not a redirect: the next request is then a same-site navigation, which carries the
    # sign-in's SameSite=Strict cookie (a redirect chain begun at the provider would not).
    target = escape(pending.next_path, quote=True)
    response = HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
        f'<title>Signed in</title></head><body><p>Signed in as {escape(who.person)}. <a href="{target}">Continue</a></p></body></html>'
    )
    set_session_cookie(response, request, cookie)
    response.delete_cookie(STATE_COOKIE, path=f"{UI_PREFIX}/oidc/")
    return response


async def _exchange(
    request: Request, http: httpx.AsyncClient, name: str, config: OidcProvider, pending: PendingLogin, code: str
) -> dict[str, Any]:
    if not code:
        raise IdTokenRefused("the provider sent no code")
    logins = _logins(request)
    document = await logins.discovery(config, http)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": _callback_url(request, name),
            "client_id": config.client_id, "code_verifier": pending.verifier}  # fmt: skip
    if config.client_secret_name is not None:
        form["client_secret"] = services_of(request).secrets.get(config.client_secret_name)
    answer = _json_object(await http.post(document["token_endpoint"], data=form), "the token endpoint")
    id_token = answer.get("id_token")
    if not isinstance(id_token, str):
        raise IdTokenRefused("the token endpoint sent no id_token")
    access_token = answer.get("access_token")
    return await logins.verify(id_token, config, pending.nonce, http,
                               access_token=access_token if isinstance(access_token, str) else None)  # fmt: skip


async def _github_identity(
    request: Request, http: httpx.AsyncClient, name: str, config: OidcProvider, pending: PendingLogin, code: str
) -> tuple[str, list[str]]:
    if not code:
        raise IdTokenRefused("the provider sent no code")
    secret = services_of(request).secrets.get(config.client_secret_name or "")  # required for github (config.py)
    user = await github_sign_in.sign_in(http, config, code=code, redirect_uri=_callback_url(request, name),
                                        verifier=pending.verifier, client_secret=secret)  # fmt: skip
    logger.info("single sign-on %s: GitHub user %s", name, user.login)
    return user.email, list(user.groups)


def _oidc_identity(config: OidcProvider, claims: dict[str, Any]) -> tuple[str, list[str]]:
    """The id_token's verified email and its groups."""
    email = claims.get("email")
    verified = claims.get("email_verified")
    if config.assume_email_verified and "email_verified" not in claims:
        verified = True
    if not isinstance(email, str) or "@" not in email or verified is not True:
        # Fail closed: an email nobody vouched for could be anyone's (a CLI person's included).
        raise IdTokenRefused(
            "the id_token names no verified email (email_verified is not true); for a provider that never "
            "sends email_verified, set [auth.oidc.NAME] assume_email_verified = true"
        )
    groups = claims.get(config.groups_claim) or []
    return email.lower(), [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else []


async def _person_of(services: DashboardServices, name: str, config: OidcProvider, email: str, groups: list[str]) -> SignedInAs:
    """The person a verified email (and its groups, by the provider's rules) is, made or updated."""
    written = config.roles_for(email=email, groups=groups)
    made_by = f"oidc:{name}"
    known = await services.people.by_email(email)
    if known is not None and known.created_by != made_by:
        return SignedInAs(person=known.name, email=email)  # the CLI's person: the CLI's roles
    if not written:
        raise UsageError(f"{email} has no role here", hint="an admin gives one with `pincer people add NAME --role viewer --email EMAIL`")
    roles = parse_roles(written)
    if known is not None:
        await services.people.set_roles(known.name, roles)
        return SignedInAs(person=known.name, email=email)
    person = _name_for(email)
    if await services.people.get(person) is not None:
        raise UsageError(f"the name {person!r} is another person's", hint="an admin adds this person with `pincer people add NAME --email EMAIL`")
    await services.people.add(person, roles=roles, email=email, by=made_by, now=time.time())
    return SignedInAs(person=person, email=email)


def _name_for(email: str) -> str:
    local = "".join(c if c.isalnum() or c in "._-" else "-" for c in email.partition("@")[0].lower())
    return (local.lstrip("._-") or "person")[:64]


def routes() -> list[Route]:
    return [
        Route("/login/oidc/{provider:str}", start, methods=["GET"]),
        Route("/oidc/{provider:str}/callback", callback, methods=["GET"]),
    ]
