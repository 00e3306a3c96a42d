"""OAuth 2.0 logins for the built-ins: authorization code with PKCE (RFC 6749, RFC 7636) on a
loopback redirect (RFC 8252), refresh, and revocation (RFC 7009), for Google, Slack's OAuth v2 and
GitHub's OAuth (an OAuth app's or a GitHub App's user login).

authlib builds and reads the protocol messages (the authorization URL with its S256 challenge,
the redirect's ``state`` check, the token request bodies); every request to a provider goes
through pincer's egress client, to exactly the endpoint the provider table or
``[builtins.NAME] authorization_url / token_url / revocation_url`` names, like every other
request a built-in makes.

What is stored: the access token in the secret the tools inject (``google_oauth_token``,
``slack_bot_token``), the refresh token in its own secret, the client id and secret in theirs;
``HOME/oauth/NAME.json`` keeps what is not secret (expiry, scopes, when), so ``pincer auth
status`` can show the expiry without reading a value. A person's own login (``pincer auth setup
NAME --person WHO``, the dashboard's Connect: the access token's secret is in ``[secrets]
per_person``) keeps both tokens as that person's values (``person_secrets``) and its record at
``HOME/oauth/people/WHO/NAME.json``; a refresh for a call on their behalf reads and writes theirs
only, never another person's nor the shared login. A refresh that the provider answers with
``invalid_grant`` (Google revokes the refresh tokens of apps in "testing" status after 7 days)
is :class:`ReauthRequired` naming ``pincer auth setup NAME``: never retried.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

import anyio

from pincer.core.errors import OAuthCallbackRefused, ReauthRequired, ToolError, UsageError
from pincer.core.extras import require

__all__ = [
    "PROVIDERS",
    "OAuthProvider",
    "LoginStart",
    "TokenRecord",
    "TokenKeeper",
    "provider_for",
    "begin_login",
    "code_from_redirect",
    "exchange_code",
    "refresh_tokens",
    "client_credentials_token",
    "revoke_login",
    "load_record",
    "forget_login",
    "PersonValues",
    "login_for_secret",
    "login_scopes",
    "OAUTH_HTTP_TIMEOUT_S",
    "REFRESH_LEEWAY_S",
]

logger = logging.getLogger(__name__)

OAUTH_HTTP_TIMEOUT_S = 30.0  # one token, refresh or revocation request
REFRESH_LEEWAY_S = 60.0  # an access token this close to its expiry is refreshed before use
MAX_TOKEN_ANSWER_BYTES = 65_536
_RECORD_DIR = "oauth"


class SecretWriter(Protocol):
    """The secret store's calls this module makes (``SecretStore`` is one)."""

    def find(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> None: ...


class PersonStore(SecretWriter, Protocol):
    """The secret store with each person's own values (``SecretStore``)."""

    def find_for(self, person: str, name: str) -> str | None: ...

    def set_for(self, person: str, name: str, value: str) -> None: ...

    def delete_for(self, person: str, name: str | None = None) -> int: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class PersonValues:
    """One person's own values, read and written as a :class:`SecretWriter`: a login kept as
    theirs goes through the same code as the shared one and cannot reach another's values."""

    store: PersonStore
    person: str

    def find(self, name: str) -> str | None:
        return self.store.find_for(self.person, name)

    def set(self, name: str, value: str) -> None:
        self.store.set_for(self.person, name, value)

    def delete(self, name: str) -> None:
        if self.store.find_for(self.person, name) is not None:
            self.store.delete_for(self.person, name)


def _tokens_of(store: SecretWriter, person: str | None) -> SecretWriter:
    """Where a login's tokens are: the shared values, or ``person``'s own."""
    if person is None:
        return store
    return PersonValues(store=cast(PersonStore, store), person=person)


@dataclass(frozen=True, kw_only=True, slots=True)
class OAuthProvider:
    """One provider's login: its endpoints, where its values are stored, how it speaks."""

    name: str
    display_name: str
    authorization_url: str
    token_url: str
    revocation_url: str | None
    access_secret: str  # the secret the tools inject
    refresh_secret: str
    client_id_secret: str
    client_secret_secret: str
    client_id_env: str
    client_secret_env: str
    console_url: str
    scope_separator: str = " "
    extra_params: Mapping[str, str] = field(default_factory=dict)
    # Slack answers 200 with {"ok": false, "error": ...}; its revocation is auth.revoke with the
    # token as a bearer header rather than RFC 7009's form field.
    slack_style: bool = False
    configured: frozenset[str] = frozenset()  # which endpoints came from config.toml
    # An OpenAPI document's endpoints follow the OpenAPI runtime's rule: plain http to loopback
    # when the operator allows the private network ([network] allow_private), as the API itself.
    loopback_http: bool = False
    login_command: str = ""  # how a person logs in again; "" means `pincer auth setup NAME`

    @property
    def setup_command(self) -> str:
        return self.login_command or f"pincer auth setup {self.name}"


PROVIDERS: dict[str, OAuthProvider] = {
    "google": OAuthProvider(
        name="google",
        display_name="Google",
        authorization_url="https://accounts.google.com/o/oauth2/v2/auth",
        token_url="https://oauth2.googleapis.com/token",
        revocation_url="https://oauth2.googleapis.com/revoke",
        access_secret="google_oauth_token",
        refresh_secret="google_oauth_refresh_token",
        client_id_secret="google_oauth_client_id",
        client_secret_secret="google_oauth_client_secret",
        client_id_env="GOOGLE_OAUTH_CLIENT_ID",
        client_secret_env="GOOGLE_OAUTH_CLIENT_SECRET",
        console_url="https://console.cloud.google.com/apis/credentials",
        # offline: a refresh token; consent: Google issues one again on a repeated login.
        extra_params={"access_type": "offline", "prompt": "consent"},
    ),
    "slack": OAuthProvider(
        name="slack",
        display_name="Slack",
        authorization_url="https://slack.com/oauth/v2/authorize",
        token_url="https://slack.com/api/oauth.v2.access",
        revocation_url="https://slack.com/api/auth.revoke",
        access_secret="slack_bot_token",
        refresh_secret="slack_oauth_refresh_token",
        client_id_secret="slack_oauth_client_id",
        client_secret_secret="slack_oauth_client_secret",
        client_id_env="SLACK_OAUTH_CLIENT_ID",
        client_secret_env="SLACK_OAUTH_CLIENT_SECRET",
        console_url="https://api.slack.com/apps",
        scope_separator=",",
        slack_style=True,
    ),
    # An OAuth app's (or a GitHub App's) user login, for the github tool's token: GitHub answers a
    # refused code with HTTP 200 and {"error": ...}, and has no RFC 7009 revocation endpoint (an
    # app's grant is revoked in the person's GitHub settings).
    "github": OAuthProvider(
        name="github",
        display_name="GitHub",
        authorization_url="https://github.com/login/oauth/authorize",
        token_url="https://github.com/login/oauth/access_token",
        revocation_url=None,
        access_secret="github_token",
        refresh_secret="github_oauth_refresh_token",
        client_id_secret="github_oauth_client_id",
        client_secret_secret="github_oauth_client_secret",
        client_id_env="GITHUB_OAUTH_CLIENT_ID",
        client_secret_env="GITHUB_OAUTH_CLIENT_SECRET",
        console_url="https://github.com/settings/developers",
        login_command="pincer auth setup github --oauth",
    ),
}

# The scopes the github tool's actions need (an OAuth app's; a GitHub App's permissions are its own).
GITHUB_SCOPES = ("repo",)

# The bot scopes the slack tool's actions need (post, reply, channels, history, reactions, upload).
SLACK_SCOPES = (
    "chat:write", "channels:read", "groups:read", "channels:history", "groups:history",
    "reactions:read", "reactions:write", "files:write", "users:read",
)


def login_scopes(name: str, settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The scopes the built-in ``name``'s login asks for: Google's, those its enabled tools need."""
    if name == "google":
        from pincer.builtins.google import login_scopes as google_scopes

        return tuple(google_scopes(settings))
    return GITHUB_SCOPES if name == "github" else SLACK_SCOPES


def login_for_secret(secret: str, settings: Mapping[str, Any]) -> OAuthProvider | None:
    """The built-in OAuth login whose access token is kept in ``secret`` (None: no login's)."""
    for name in PROVIDERS:
        provider = provider_for(name, settings)
        if provider.access_secret == secret:
            return provider
    return None


def provider_for(name: str, settings: Mapping[str, Any]) -> OAuthProvider:
    """The provider ``name`` with the endpoints ``[builtins.NAME]`` overrides."""
    base = PROVIDERS.get(name)
    if base is None:
        raise UsageError(
            f"no OAuth login called {name!r}",
            hint=f"run `pincer auth setup` with one of: {', '.join(sorted(PROVIDERS))}",
        )
    own = settings.get(name)
    changes: dict[str, Any] = {}
    for key in ("authorization_url", "token_url", "revocation_url"):
        value = getattr(own, key, None) if own is not None else None
        if value:
            changes[key] = str(value)
    return replace(base, **changes, configured=frozenset(changes))


# ------------------------------------------------------------------------------------- the record


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenRecord:
    """What is known about a stored login without its values (``HOME/oauth/NAME.json``)."""

    provider: str
    scopes: tuple[str, ...]
    obtained_at: float
    expires_at: float | None  # None: the provider gave no expiry (Slack's bot tokens)
    has_refresh: bool

    def expires_within(self, seconds: float, *, now: float | None = None) -> bool:
        return self.expires_at is not None and self.expires_at - (now or time.time()) <= seconds

    def to_json(self) -> dict[str, Any]:
        return {"provider": self.provider, "scopes": list(self.scopes), "obtained_at": self.obtained_at,
                "expires_at": self.expires_at, "has_refresh": self.has_refresh}


def _record_path(home: Path, name: str, person: str | None = None) -> Path:
    if person is None:
        return Path(home) / _RECORD_DIR / f"{name}.json"
    from pincer.store.people import check_person_name

    # The name is checked (letters, digits, ._-) before it becomes a directory of the home.
    return Path(home) / _RECORD_DIR / "people" / check_person_name(person) / f"{name}.json"


def load_record(home: Path, name: str, person: str | None = None) -> TokenRecord | None:
    """What is known of the shared login ``name``, or of ``person``'s own."""
    path = _record_path(home, name, person)
    try:
        data = json.loads(path.read_text("utf-8"))
        return TokenRecord(
            provider=str(data["provider"]),
            scopes=tuple(str(s) for s in data.get("scopes") or ()),
            obtained_at=float(data["obtained_at"]),
            expires_at=float(data["expires_at"]) if data.get("expires_at") is not None else None,
            has_refresh=bool(data.get("has_refresh")),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        logger.warning("%s is unreadable; the %s login counts as expired", path, name)
        return TokenRecord(provider=name, scopes=(), obtained_at=0.0, expires_at=0.0, has_refresh=True)


def _save_record(home: Path, record: TokenRecord, person: str | None = None) -> None:
    from pincer.store.jsonfile import write_bytes_atomic

    path = _record_path(home, record.provider, person)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, json.dumps(record.to_json(), indent=2).encode("utf-8"))


def forget_login(store: SecretWriter, home: Path, provider: OAuthProvider, person: str | None = None) -> bool:
    """Delete the stored tokens and the record (the client id and secret stay), the shared
    login's or ``person``'s own. True if any was."""
    had = False
    tokens = _tokens_of(store, person)
    for name in (provider.access_secret, provider.refresh_secret):
        if tokens.find(name) is not None:
            tokens.delete(name)
            had = True
    path = _record_path(home, provider.name, person)
    if path.exists():
        path.unlink()
        had = True
    return had


# ------------------------------------------------------------------------------------- the flow


@dataclass(frozen=True, kw_only=True, slots=True)
class LoginStart:
    """One login in progress: the URL to open and what the redirect must match."""

    provider: str
    url: str = field(repr=False)
    state: str = field(repr=False)
    code_verifier: str = field(repr=False)
    redirect_uri: str
    scopes: tuple[str, ...]


def begin_login(provider: OAuthProvider, *, client_id: str, scopes: Sequence[str], redirect_uri: str) -> LoginStart:
    """The authorization URL with a fresh ``state`` and an S256 PKCE challenge (authlib's)."""
    generate_token = require("oauth", "authlib.common.security").generate_token
    prepare_grant_uri = require("oauth", "authlib.oauth2.rfc6749.parameters").prepare_grant_uri
    create_s256_code_challenge = require("oauth", "authlib.oauth2.rfc7636").create_s256_code_challenge

    state = generate_token(32)
    verifier = generate_token(64)  # RFC 7636: 43-128 characters of [A-Za-z0-9-._~]
    url = prepare_grant_uri(
        provider.authorization_url,
        client_id=client_id,
        response_type="code",
        redirect_uri=redirect_uri,
        scope=provider.scope_separator.join(scopes),
        state=state,
        code_challenge=create_s256_code_challenge(verifier),
        code_challenge_method="S256",
        **dict(provider.extra_params),
    )
    return LoginStart(provider=provider.name, url=url, state=state, code_verifier=verifier,
                      redirect_uri=redirect_uri, scopes=tuple(scopes))


def code_from_redirect(start: LoginStart, url: str) -> str:
    """The authorization code of a redirect URL; OAuthCallbackRefused when its ``state`` is not
    this login's (a forged or stale redirect), or when it carries the provider's error."""
    MismatchingStateException = require("oauth", "authlib.oauth2.rfc6749.errors").MismatchingStateException
    MissingCodeException = require("oauth", "authlib.oauth2.rfc6749.errors").MissingCodeException
    parse_authorization_code_response = require("oauth", "authlib.oauth2.rfc6749.parameters").parse_authorization_code_response

    text = url.strip()
    if not text.startswith(("http://", "https://")) or urlsplit(text).query == "":
        raise OAuthCallbackRefused(
            "the pasted text is not the redirect URL (it must start with http:// and carry ?code=...&state=...)",
            hint=f"copy the whole address from the browser's address bar after consenting, then run "
            f"`pincer auth setup {start.provider} --no-browser` again if it timed out",
        )
    from urllib.parse import parse_qs

    query = parse_qs(urlsplit(text).query)
    try:
        if "error" in query and query.get("state", [None])[0] == start.state:
            declined = OAuthCallbackRefused(
                f"{start.provider} answered the login with {query['error'][0][:100]!r} instead of a code",
                hint=f"consent to the scopes shown, then run `pincer auth setup {start.provider}` again",
            )
            declined.declined = True
            raise declined
        result = parse_authorization_code_response(text, state=start.state)
    except MismatchingStateException:
        raise OAuthCallbackRefused(
            "the redirect's state does not match this login's (a forged or stale redirect): refused",
            hint=f"start over with `pincer auth setup {start.provider}` and use only the redirect it leads to",
        ) from None
    except MissingCodeException:
        raise OAuthCallbackRefused(
            "the redirect carries no authorization code",
            hint=f"consent in the browser, then run `pincer auth setup {start.provider}` again",
        ) from None
    return str(result["code"])


async def _post_form(
    provider: OAuthProvider,
    endpoint: str,
    url: str,
    body: str,
    *,
    bearer: str | None = None,
    basic: tuple[str, str] | None = None,
    allow_private_network: bool = False,
) -> tuple[int, Any]:
    """POST a form to one of the provider's endpoints through the egress client; ``basic`` is
    the client's id and secret as HTTP Basic (RFC 6749 2.3.1's client_secret_basic)."""
    from pincer.safety import egress
    from pincer.safety.egress_policy import EgressPolicy, EgressRule

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    pattern = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    trusted = frozenset({(parts.scheme, host.lower(), port)}) if endpoint in provider.configured else frozenset()
    policy = EgressPolicy(
        rules=(EgressRule(host=pattern, path_prefix=parts.path or "/", methods=frozenset({"POST"})),),
        allow_private_network=allow_private_network,
        allow_plain_http_loopback=provider.loopback_http and allow_private_network,
        trusted_origins=trusted,
        max_response_bytes=MAX_TOKEN_ANSWER_BYTES,
        timeout_s=OAUTH_HTTP_TIMEOUT_S,
    )
    headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
    if bearer is not None:
        headers.append(("Authorization", f"Bearer {bearer}"))
    if basic is not None:
        import base64
        from urllib.parse import quote

        # RFC 6749 2.3.1: each of id and secret form-encoded before they are joined.
        pair = f"{quote(basic[0], safe='')}:{quote(basic[1], safe='')}"
        headers.append(("Authorization", "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")))
    request = egress.HttpRequest(method="POST", url=url, headers=tuple(headers), body=body.encode("utf-8"))
    response = await egress.send(request, policy=policy)
    try:
        data = json.loads(response.body.decode("utf-8")) if response.body else None
    except (UnicodeDecodeError, ValueError):
        data = None
    return response.status, data


def _provider_error(status: int, data: Any, provider: OAuthProvider) -> str | None:
    """The OAuth error code of an answer, or None when it is a success."""
    if isinstance(data, Mapping):
        if provider.slack_style and data.get("ok") is False:
            return str(data.get("error") or "unknown_error")
        if isinstance(data.get("error"), str):
            return str(data["error"])
    if status != 200:
        return f"http_{status}"
    return None


# Answers that mean the login itself is gone: the person must reconnect.
_REAUTH_ERRORS = frozenset({"invalid_grant", "invalid_refresh_token", "token_revoked", "token_expired",
                            "unauthorized_client", "invalid_client", "account_inactive"})


def _store_tokens(store: SecretWriter, home: Path, provider: OAuthProvider, data: Mapping[str, Any],
                  *, scopes: Sequence[str], keep_refresh: bool, person: str | None = None) -> TokenRecord:
    access = data.get("access_token")
    if not isinstance(access, str) or not access:
        raise ToolError(f"{provider.display_name}'s token answer has no access_token",
                        hint=f"check [builtins.{provider.name}] token_url in config.toml, then run "
                        f"`{provider.setup_command}` again")
    store.set(provider.access_secret, access)
    refresh = data.get("refresh_token")
    if isinstance(refresh, str) and refresh:
        store.set(provider.refresh_secret, refresh)
    elif not keep_refresh and store.find(provider.refresh_secret) is not None:
        store.delete(provider.refresh_secret)
    now = time.time()
    expires_in = data.get("expires_in")
    granted = data.get("scope")
    record = TokenRecord(
        provider=provider.name,
        scopes=tuple(str(granted).replace(",", " ").split()) if isinstance(granted, str) and granted else tuple(scopes),
        obtained_at=now,
        expires_at=now + float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None,
        has_refresh=store.find(provider.refresh_secret) is not None,
    )
    _save_record(home, record, person)
    return record


async def exchange_code(
    provider: OAuthProvider,
    start: LoginStart,
    code: str,
    *,
    client_id: str,
    client_secret: str | None,
    store: SecretWriter,
    home: Path,
    allow_private_network: bool = False,
    person: str | None = None,
) -> TokenRecord:
    """Trade the code (with the PKCE verifier) for tokens and store them: as the shared login, or
    as ``person``'s own values (``store`` is then the store with people's values)."""
    prepare_token_request = require("oauth", "authlib.oauth2.rfc6749.parameters").prepare_token_request

    body = prepare_token_request(
        "authorization_code",
        code=code,
        redirect_uri=start.redirect_uri,
        client_id=client_id,
        client_secret=client_secret,
        code_verifier=start.code_verifier,
    )
    status, data = await _post_form(provider, "token_url", provider.token_url, body,
                                    allow_private_network=allow_private_network)
    error = _provider_error(status, data, provider)
    if error is not None:
        raise ToolError(
            f"{provider.display_name} refused the authorization code: {error}",
            hint=f"run `{provider.setup_command}` again (a code is good for one exchange, within minutes)",
        )
    return _store_tokens(_tokens_of(store, person), home, provider, data, scopes=start.scopes, keep_refresh=False,
                         person=person)


async def client_credentials_token(
    provider: OAuthProvider,
    *,
    client_id: str,
    client_secret: str,
    scopes: Sequence[str] = (),
    allow_private_network: bool = False,
) -> tuple[str, float | None]:
    """RFC 6749 4.4: an access token for the client itself, and when it expires (None: the
    provider gave no expiry). Nothing is stored: the caller keeps it in memory."""
    prepare_token_request = require("oauth", "authlib.oauth2.rfc6749.parameters").prepare_token_request

    body = prepare_token_request("client_credentials", scope=" ".join(scopes) if scopes else None)
    status, data = await _post_form(provider, "token_url", provider.token_url, body, basic=(client_id, client_secret),
                                    allow_private_network=allow_private_network)
    error = _provider_error(status, data, provider)
    access = data.get("access_token") if isinstance(data, Mapping) else None
    if error is not None or not isinstance(access, str) or not access:
        raise ToolError(
            f"{provider.display_name} refused the client credentials: {error or 'no access_token in the answer'}",
            hint=f"check the client id and secret: `pincer secrets set {provider.client_id_secret}` and "
            f"`pincer secrets set {provider.client_secret_secret}`",
        )
    expires_in = data.get("expires_in") if isinstance(data, Mapping) else None
    expires_at = time.time() + float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None
    return access, expires_at


def _client(store: SecretWriter, provider: OAuthProvider) -> tuple[str, str | None]:
    client_id = store.find(provider.client_id_secret)
    if not client_id:
        raise ReauthRequired(
            f"{provider.display_name}: no OAuth client id is stored ({provider.client_id_secret})",
            hint=f"run `{provider.setup_command}`",
        )
    return client_id, store.find(provider.client_secret_secret)


def _reconnect(provider: OAuthProvider, person: str | None) -> str:
    return provider.setup_command + (f" --person {person}" if person is not None else "")


async def refresh_tokens(
    provider: OAuthProvider, *, store: SecretWriter, home: Path, allow_private_network: bool = False,
    person: str | None = None,
) -> TokenRecord:
    """One refresh of the shared login, or of ``person``'s own (their refresh token, stored back
    as theirs; the client id and secret are the app's, shared); ReauthRequired when there is no
    refresh token or the provider refuses it."""
    prepare_token_request = require("oauth", "authlib.oauth2.rfc6749.parameters").prepare_token_request

    tokens = _tokens_of(store, person)
    whose = f" ({person}'s own)" if person is not None else ""
    refresh = tokens.find(provider.refresh_secret)
    if not refresh:
        raise ReauthRequired(
            f"{provider.display_name}: the login{whose} has expired and holds no refresh token",
            hint=f"reconnect with `{_reconnect(provider, person)}`",
        )
    client_id, client_secret = _client(store, provider)
    body = prepare_token_request(
        "refresh_token", refresh_token=refresh, client_id=client_id, client_secret=client_secret
    )
    status, data = await _post_form(provider, "token_url", provider.token_url, body,
                                    allow_private_network=allow_private_network)
    error = _provider_error(status, data, provider)
    if error is not None:
        if error in _REAUTH_ERRORS or status in (400, 401):
            raise ReauthRequired(
                f"{provider.display_name} refused the stored login{whose} ({error}): it was revoked or expired"
                + (" (Google revokes the refresh tokens of apps in testing status after 7 days)"
                   if provider.name == "google" else ""),
                hint=f"reconnect with `{_reconnect(provider, person)}`",
            )
        raise ToolError(
            f"{provider.display_name}: refreshing the login failed ({error})",
            hint="retry later; if it persists, check [builtins."
            f"{provider.name}] token_url in config.toml or run `{provider.setup_command}`",
        )
    previous = load_record(home, provider.name, person)
    scopes = previous.scopes if previous is not None else ()
    return _store_tokens(tokens, home, provider, data, scopes=scopes, keep_refresh=True, person=person)


async def revoke_login(
    provider: OAuthProvider, *, store: SecretWriter, home: Path, allow_private_network: bool = False,
    person: str | None = None,
) -> dict[str, Any]:
    """Revoke at the provider (the refresh token, which ends the whole grant, else the access
    token), then forget locally whatever the provider answered; the result says both. With
    ``person``: their own login (the shared one and everyone else's stay)."""
    tokens = _tokens_of(store, person)
    token = tokens.find(provider.refresh_secret) or tokens.find(provider.access_secret)
    revoked: bool | None = None
    answer: str | None = None
    if token and provider.revocation_url:
        from urllib.parse import urlencode

        if provider.slack_style:
            status, data = await _post_form(provider, "revocation_url", provider.revocation_url, "",
                                            bearer=tokens.find(provider.access_secret) or token,
                                            allow_private_network=allow_private_network)
        else:
            # RFC 7009: a confidential client authenticates (client_secret_post); Google's
            # endpoint needs only the token and ignores the rest.
            form = {"token": token, "client_id": store.find(provider.client_id_secret) or ""}
            secret = store.find(provider.client_secret_secret)
            if secret:
                form["client_secret"] = secret
            status, data = await _post_form(provider, "revocation_url", provider.revocation_url,
                                            urlencode(form), allow_private_network=allow_private_network)
        error = _provider_error(status, data, provider)
        revoked = error is None
        answer = error
    forgot = forget_login(store, home, provider, person)
    return {"revoked_at_server": revoked, "server_error": answer, "forgot_locally": forgot}


# ------------------------------------------------------------------------------ for the tools


class TokenKeeper:
    """Keeps the logins fresh for the tools that inject them: refreshed before expiry
    (:data:`REFRESH_LEEWAY_S`) and once after a 401; concurrent calls share one refresh.

    A login whose access token's secret is per person (``per_person()``, read at each use so a
    reload applies) is the calling person's own: ``person`` names whose record is read and whose
    tokens are refreshed and stored back; for a call of no person there is nothing to refresh (the
    chain refuses the call its credential). Each login of each person has a lock of its own: two
    calls of gina's share one refresh, and bo's never waits on hers."""

    def __init__(self, *, store: SecretWriter, home: Path, settings: Mapping[str, Any],
                 allow_private_network: bool = False,
                 per_person: Callable[[], Collection[str]] = tuple) -> None:  # fmt: skip
        self._store = store
        self._home = Path(home)
        self._settings = settings
        self._allow_private = allow_private_network
        self._per_person = per_person
        self._locks: dict[tuple[str, str | None], anyio.Lock] = {}

    def _whose(self, name: str, person: str | None) -> tuple[bool, str | None]:
        """(whether there is a login to keep for this call, whose it is: None for the shared one)."""
        if provider_for(name, self._settings).access_secret not in self._per_person():
            return True, None
        return person is not None, person

    def _lock(self, name: str, person: str | None) -> anyio.Lock:
        return self._locks.setdefault((name, person), anyio.Lock())

    def stamp(self, name: str, person: str | None = None) -> float | None:
        """When the stored access token was obtained (compare before and after a 401)."""
        kept, whose = self._whose(name, person)
        record = load_record(self._home, name, whose) if kept else None
        return record.obtained_at if record is not None else None

    async def ensure_fresh(self, name: str, person: str | None = None) -> None:
        """Refresh the login when its access token expires within the leeway."""
        kept, whose = self._whose(name, person)
        if not kept:
            return
        record = load_record(self._home, name, whose)
        if record is None or not record.expires_within(REFRESH_LEEWAY_S):
            return
        async with self._lock(name, whose):
            record = load_record(self._home, name, whose)
            if record is not None and record.expires_within(REFRESH_LEEWAY_S):
                await self._refresh(name, whose)

    async def after_unauthorized(self, name: str, stamp: float | None, person: str | None = None) -> None:
        """The provider answered 401 to a token obtained at ``stamp``: refresh once, unless
        another call refreshed it meanwhile. ReauthRequired when the refresh is refused."""
        kept, whose = self._whose(name, person)
        if not kept:
            return
        async with self._lock(name, whose):
            if self.stamp(name, whose) != stamp:
                return
            await self._refresh(name, whose)

    async def _refresh(self, name: str, person: str | None) -> None:
        provider = provider_for(name, self._settings)
        logger.info("%s: refreshing the OAuth login%s", name, f" of {person}" if person is not None else "")
        await refresh_tokens(provider, store=self._store, home=self._home,
                             allow_private_network=self._allow_private, person=person)
