"""The ``auth`` and ``setup`` sections of a capabilities manifest: how a person gives a tool its
credentials (a pasted token, an OAuth login, secrets asked for at install), not what it may do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.core.jsonread import JsonReader, key_at

__all__ = ["AuthSpec", "OAuthConfig", "SetupSpec", "SetupSecret", "ValidationEndpoint", "read_auth", "read_setup"]



@dataclass(frozen=True, kw_only=True, slots=True)
class ValidationEndpoint:
    """A request that proves a credential works: ``auth.validation_endpoint`` (an object) or
    ``setup.validation_endpoint`` (a bare URL, possibly with ``{secret_name}`` placeholders)."""

    url: str
    method: str = "GET"
    success_status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class OAuthConfig:
    """Browser login settings. A literal ``client_secret`` in a manifest is deliberately not kept."""

    authorization_url: str
    token_url: str
    client_id: str | None = None
    client_id_env: str | None = None
    client_secret_env: str | None = None
    scopes: tuple[str, ...] = ()
    use_pkce: bool = True
    extra_params: Mapping[str, str] = field(default_factory=dict)
    access_token_field: str = "access_token"


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthSpec:
    secret_name: str
    display_name: str | None = None
    instructions: str | None = None
    setup_url: str | None = None
    token_hint: str | None = None
    env_var: str | None = None
    provider: str | None = None
    optional: bool = False
    oauth: OAuthConfig | None = None
    validation_endpoint: ValidationEndpoint | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SetupSecret:
    name: str
    prompt: str
    optional: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class SetupSpec:
    """Secrets a person provides before first use: ``required_secrets`` then ``optional_secrets``."""

    secrets: tuple[SetupSecret, ...] = ()
    setup_url: str | None = None
    validation_endpoint: ValidationEndpoint | None = None


def _endpoint(r: JsonReader, m: Mapping[str, Any], at: str) -> ValidationEndpoint | None:
    value = m.get("validation_endpoint")
    if value is None:
        return None
    if isinstance(value, str):
        return ValidationEndpoint(url=value)
    at = key_at(at, "validation_endpoint")
    e = r.obj(value, at, "a URL or an object with url, method, success_status and headers")
    return ValidationEndpoint(
        url=r.text(e, "url", at, required=True) or "",
        method=(r.text(e, "method", at) or "GET").upper(),
        success_status=r.number(e, "success_status", at, 200, minimum=100),
        headers=r.text_map(e, "headers", at),
    )


def read_auth(r: JsonReader, m: Mapping[str, Any], at: str) -> AuthSpec:
    oauth = None
    if (o := r.section(m, "oauth", at)) is not None:
        oat = key_at(at, "oauth")
        oauth = OAuthConfig(
            authorization_url=r.text(o, "authorization_url", oat, required=True) or "",
            token_url=r.text(o, "token_url", oat, required=True) or "",
            client_id=r.text(o, "client_id", oat),
            client_id_env=r.text(o, "client_id_env", oat),
            client_secret_env=r.text(o, "client_secret_env", oat),
            scopes=r.texts(o, "scopes", oat),
            use_pkce=r.flag(o, "use_pkce", oat, default=True),
            extra_params=r.text_map(o, "extra_params", oat),
            access_token_field=r.text(o, "access_token_field", oat) or "access_token",
        )
    texts = ("display_name", "instructions", "setup_url", "token_hint", "env_var", "provider")
    return AuthSpec(
        secret_name=r.text(m, "secret_name", at, required=True) or "",
        optional=r.flag(m, "optional", at),
        oauth=oauth,
        validation_endpoint=_endpoint(r, m, at),
        **{n: r.text(m, n, at) for n in texts},
    )


def read_setup(r: JsonReader, m: Mapping[str, Any], at: str) -> SetupSpec:
    secrets = []
    for group, optional in (("required_secrets", False), ("optional_secrets", True)):
        for where, item in r.items(m, group, at, "a list of {name, prompt} objects"):
            s = r.obj(item, where, "an object with name and prompt")
            secrets.append(SetupSecret(name=r.text(s, "name", where, required=True) or "",
                                       prompt=r.text(s, "prompt", where, required=True) or "",
                                       optional=r.flag(s, "optional", where, default=optional)))  # fmt: skip
    return SetupSpec(secrets=tuple(secrets), setup_url=r.text(m, "setup_url", at), validation_endpoint=_endpoint(r, m, at))
