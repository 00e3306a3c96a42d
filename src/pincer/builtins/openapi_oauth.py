"""OAuth 2.0 for OpenAPI services: a document's ``oauth2`` and ``openIdConnect`` schemes through
pincer's OAuth (:mod:`pincer.builtins.oauth`).

* authorization code: ``pincer openapi login SERVICE --scheme KEY`` runs the same login as
  ``pincer auth setup`` (PKCE, loopback redirect) against the document's endpoints; the access
  token goes to the scheme's secret, the refresh token to ``{secret}_refresh_token``, and the
  token is refreshed before it expires, as the built-ins' logins are;
* client credentials: the token endpoint is asked with ``{secret}_client_id`` and
  ``{secret}_client_secret`` (HTTP Basic), for the scopes the operation asks, and the token is
  kept in memory until shortly before it expires;
* an access token set by hand in the scheme's secret is sent as it is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio

from pincer.builtins.oauth import (
    REFRESH_LEEWAY_S,
    OAuthProvider,
    SecretWriter,
    client_credentials_token,
    load_record,
    refresh_tokens,
)
from pincer.core.values import HostContext
from pincer.runtimes.openapi.config import ServiceConfig
from pincer.runtimes.openapi.security import SecurityScheme
from pincer.secrets.access import per_person_refusal

__all__ = ["provider_for_scheme", "OpenApiTokens"]


def provider_for_scheme(service: str, scheme: SecurityScheme) -> OAuthProvider:
    """The scheme as an OAuth provider: the document's endpoints, the scheme's secrets."""
    code = scheme.flow("authorizationCode")
    client = scheme.flow("clientCredentials")
    token_url = next((f.token_url for f in (code, client) if f is not None and f.token_url), None)
    return OAuthProvider(
        name=f"openapi_{scheme.secret}",
        display_name=f"{service} ({scheme.key})",
        authorization_url=(code.authorization_url if code is not None else None) or "",
        token_url=token_url or "",
        revocation_url=None,
        access_secret=scheme.secret,
        refresh_secret=scheme.refresh_secret,
        client_id_secret=scheme.client_id_secret,
        client_secret_secret=scheme.client_secret_secret,
        client_id_env="",
        client_secret_env="",
        console_url="the API's developer settings",
        loopback_http=True,
        login_command=f"pincer openapi login {service} --scheme {scheme.key}",
    )


class OpenApiTokens:
    """The runtime's :class:`pincer.runtimes.openapi.runtime.OAuthTokens`."""

    def __init__(self, *, store: SecretWriter, home: Path, allow_private_network: bool = False) -> None:
        self._store = store
        self._home = Path(home)
        self._allow_private = allow_private_network
        self._issued: dict[tuple[str, str, tuple[str, ...]], tuple[str, float | None]] = {}
        self._locks: dict[str, anyio.Lock] = {}

    def _lock(self, name: str) -> anyio.Lock:
        return self._locks.setdefault(name, anyio.Lock())

    async def access_token(
        self, service: ServiceConfig, scheme: SecurityScheme, scopes: Sequence[str], host: HostContext
    ) -> str | None:
        access = host.secrets
        if access is None:
            return None
        provider = provider_for_scheme(service.name, scheme)
        code = scheme.flow("authorizationCode")
        if code is not None and code.refresh_url:  # 3.x: refreshUrl, where it differs from tokenUrl
            await self._fresh_login(replace(provider, token_url=code.refresh_url))
        else:
            await self._fresh_login(provider)
        stored = access.find(scheme.secret)
        if stored:
            return stored
        # A per-person secret is its person's own token: no token of the service's client stands in.
        if scheme.flow("clientCredentials") is None or per_person_refusal(access, scheme.secret, tool=host.tool):
            return None
        client_id, client_secret = access.find(scheme.client_id_secret), access.find(scheme.client_secret_secret)
        if not client_id or not client_secret:
            return None
        key = (scheme.secret, client_id, tuple(sorted(scopes)))
        async with self._lock(scheme.secret):
            issued = self._issued.get(key)
            if issued is not None and (issued[1] is None or issued[1] - time.time() > REFRESH_LEEWAY_S):
                return issued[0]
            token, expires_at = await client_credentials_token(
                provider, client_id=client_id, client_secret=client_secret, scopes=scopes,
                allow_private_network=self._allow_private,
            )
            self._issued[key] = (token, expires_at)
            return token

    async def _fresh_login(self, provider: OAuthProvider) -> None:
        """A stored login (``pincer openapi login``) whose token expires soon is refreshed."""
        record = load_record(self._home, provider.name)
        if record is None or not record.has_refresh or not record.expires_within(REFRESH_LEEWAY_S):
            return
        async with self._lock(provider.name):
            record = load_record(self._home, provider.name)
            if record is not None and record.expires_within(REFRESH_LEEWAY_S):
                await refresh_tokens(provider, store=self._store, home=self._home,
                                     allow_private_network=self._allow_private)
