"""A document's ``securitySchemes`` and each operation's ``security``, mapped to pincer secrets.

Every scheme gets one secret, ``{service}_{scheme}`` (``--secret SCHEME=NAME`` at ``openapi
add`` renames it), holding what the API wants sent:

* ``apiKey`` (``in: header | query | cookie``): the key;
* ``http`` ``bearer``: the token; ``http`` ``basic``: ``user:password``;
* ``oauth2`` and ``openIdConnect``: an access token. ``pincer openapi login`` stores one for
  the authorization code flow (with its refresh token in ``{secret}_refresh_token``); for the
  client credentials flow pincer asks the token endpoint itself with ``{secret}_client_id`` and
  ``{secret}_client_secret``. ``openIdConnect`` finds its endpoints by discovery at ``add``.

An operation's ``security`` (else the document's) lists alternatives; each alternative is a set
of schemes that go together. ``security: []`` or an alternative ``{}`` means the operation may be
called anonymously; an operation the document gives no security at all is anonymous. At call time
the first alternative whose secrets are all set is used; with none, an anonymous alternative is;
with neither the call is refused naming the secrets to set. Nothing is sent where the document
does not ask for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pincer.core.errors import ManifestError, UsageError

__all__ = [
    "OAuthFlow",
    "SecurityScheme",
    "Requirement",
    "read_schemes",
    "read_requirements",
    "secret_name_for",
]

# One alternative of a ``security`` list: scheme name -> the scopes it asks for.
Requirement = Mapping[str, tuple[str, ...]]

_FLOW_KINDS = ("clientCredentials", "authorizationCode", "implicit", "password")
_SECRET_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
_COOKIE_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class OAuthFlow:
    kind: str  # clientCredentials | authorizationCode | implicit | password
    token_url: str | None = None
    authorization_url: str | None = None
    refresh_url: str | None = None
    scopes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "scopes": list(self.scopes)}
        for key in ("token_url", "authorization_url", "refresh_url"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OAuthFlow:
        return cls(kind=data["kind"], token_url=data.get("token_url"), authorization_url=data.get("authorization_url"),
                   refresh_url=data.get("refresh_url"), scopes=tuple(data.get("scopes") or ()))


@dataclass(frozen=True, kw_only=True, slots=True)
class SecurityScheme:
    key: str  # its name under components.securitySchemes
    type: str  # apiKey | http | oauth2 | openIdConnect | mutualTLS
    secret: str  # the secret holding the value sent (see the module doc)
    location: str | None = None  # apiKey: header | query | cookie
    param: str | None = None  # apiKey: the header, query parameter or cookie name
    http_scheme: str | None = None  # http: basic | bearer | ... (lower case)
    flows: tuple[OAuthFlow, ...] = ()
    openid_url: str | None = None
    description: str = ""
    unsupported: str | None = None  # why pincer cannot send it, when it cannot

    @property
    def is_oauth(self) -> bool:
        return self.type in ("oauth2", "openIdConnect")

    def flow(self, kind: str) -> OAuthFlow | None:
        return next((f for f in self.flows if f.kind == kind), None)

    @property
    def client_id_secret(self) -> str:
        return f"{self.secret}_client_id"

    @property
    def client_secret_secret(self) -> str:
        return f"{self.secret}_client_secret"

    @property
    def refresh_secret(self) -> str:
        return f"{self.secret}_refresh_token"

    def secret_names(self) -> tuple[str, ...]:
        """Every secret this scheme may read."""
        if self.is_oauth:
            return (self.secret, self.client_id_secret, self.client_secret_secret)
        return (self.secret,)

    def summary(self) -> str:
        """What the document declares, in a few words (no value)."""
        if self.type == "apiKey":
            return f"API key in {self.location} {self.param!r}"
        if self.type == "http":
            return f"HTTP {self.http_scheme}" + (" (user:password)" if self.http_scheme == "basic" else "")
        if self.type == "oauth2":
            return "OAuth 2.0 (" + ", ".join(f.kind for f in self.flows) + ")"
        if self.type == "openIdConnect":
            return f"OpenID Connect ({self.openid_url})" + (
                " (" + ", ".join(f.kind for f in self.flows) + ")" if self.flows else "")
        return self.type

    def how_to_set(self, service: str) -> str:
        """What a person does to give pincer this scheme's credential."""
        if self.unsupported:
            return f"not supported: {self.unsupported}"
        if not self.is_oauth:
            what = "user:password" if self.http_scheme == "basic" else "the value"
            return f"`pincer secrets set {self.secret}` ({what})"
        ways = []
        if self.flow("clientCredentials") is not None:
            ways.append(f"`pincer secrets set {self.client_id_secret}` and `pincer secrets set {self.client_secret_secret}`"
                        " (client credentials: pincer fetches the token)")
        if self.flow("authorizationCode") is not None:
            ways.append(f"`pincer openapi login {service} --scheme {self.key}` (authorization code)")
        ways.append(f"`pincer secrets set {self.secret}` (an access token you already have)")
        return "; or ".join(ways)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"key": self.key, "type": self.type, "secret": self.secret}
        for key in ("location", "param", "http_scheme", "openid_url", "unsupported"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.flows:
            data["flows"] = [f.to_json() for f in self.flows]
        if self.description:
            data["description"] = self.description
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SecurityScheme:
        return cls(
            key=data["key"], type=data["type"], secret=data["secret"], location=data.get("location"),
            param=data.get("param"), http_scheme=data.get("http_scheme"), openid_url=data.get("openid_url"),
            flows=tuple(OAuthFlow.from_json(f) for f in data.get("flows") or ()),
            description=data.get("description", ""), unsupported=data.get("unsupported"),
        )


def secret_name_for(service: str, scheme: str) -> str:
    """``{service}_{scheme}`` with anything a secret name cannot hold made ``_``."""
    return _SECRET_CHARS.sub("_", f"{service}_{scheme}")[:100]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _flows(raw: Any, where: str, source: str) -> tuple[OAuthFlow, ...]:
    if not isinstance(raw, Mapping):
        raise ManifestError("an oauth2 scheme needs 'flows' (an object)", source=source, key=where)
    flows = []
    for kind in _FLOW_KINDS:
        flow = raw.get(kind)
        if flow is None:
            continue
        if not isinstance(flow, Mapping):
            raise ManifestError(f"flow {kind} must be an object", source=source, key=f"{where}.flows.{kind}")
        scopes = flow.get("scopes")
        flows.append(OAuthFlow(
            kind=kind,
            token_url=_text(flow.get("tokenUrl")),
            authorization_url=_text(flow.get("authorizationUrl")),
            refresh_url=_text(flow.get("refreshUrl")),
            scopes=tuple(str(s) for s in scopes) if isinstance(scopes, Mapping) else (),
        ))
        needs = {"clientCredentials": ("tokenUrl",), "password": ("tokenUrl",), "implicit": ("authorizationUrl",),
                 "authorizationCode": ("authorizationUrl", "tokenUrl")}[kind]
        for key in needs:
            if not _text(flow.get(key)):
                raise ManifestError(f"flow {kind} has no {key}", source=source, key=f"{where}.flows.{kind}")
    return tuple(flows)


def read_schemes(
    document: Mapping[str, Any], *, service: str, source: str, secrets: Mapping[str, str] | None = None,
    deref: Any = None,
) -> tuple[SecurityScheme, ...]:
    """The document's ``components.securitySchemes``; ``secrets`` renames a scheme's secret.
    ``deref(value)`` follows a ``$ref`` (schemes may be references)."""
    components = document.get("components")
    raw = components.get("securitySchemes") if isinstance(components, Mapping) else None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ManifestError("securitySchemes must be an object", source=source, key="components.securitySchemes")
    overrides = dict(secrets or {})
    unknown = sorted(set(overrides) - set(raw))
    if unknown:
        raise UsageError(
            f"--secret names scheme {unknown[0]!r}, which the document does not declare",
            hint="the schemes are: " + (", ".join(sorted(map(str, raw))) or "none"),
        )
    schemes = []
    for key, value in raw.items():
        where = f"components.securitySchemes.{key}"
        if deref is not None:
            value = deref(value)
        if not isinstance(value, Mapping):
            raise ManifestError("a security scheme must be an object", source=source, key=where)
        kind = value.get("type")
        secret = overrides.get(str(key)) or secret_name_for(service, str(key))
        common: dict[str, Any] = {"key": str(key), "secret": secret, "description": _text(value.get("description")) or ""}
        if kind == "apiKey":
            location, name = value.get("in"), value.get("name")
            if location not in ("header", "query", "cookie"):
                raise ManifestError(f"an apiKey scheme's 'in' must be header, query or cookie, not {location!r}",
                                    source=source, key=where)
            pattern = _COOKIE_NAME if location == "cookie" else _HEADER_NAME
            if not isinstance(name, str) or not (location == "query" or pattern.match(name)):
                raise ManifestError(f"an apiKey scheme needs a usable 'name' for its {location}", source=source, key=where)
            schemes.append(SecurityScheme(type="apiKey", location=location, param=name, **common))
        elif kind == "http":
            http_scheme = str(value.get("scheme") or "").lower()
            if not http_scheme:
                raise ManifestError("an http scheme needs 'scheme' (basic, bearer, ...)", source=source, key=where)
            unsupported = None if http_scheme in ("basic", "bearer") else (
                f"HTTP {http_scheme!r} authentication (pincer sends basic and bearer)")
            schemes.append(SecurityScheme(type="http", http_scheme=http_scheme, unsupported=unsupported, **common))
        elif kind == "oauth2":
            schemes.append(SecurityScheme(type="oauth2", flows=_flows(value.get("flows"), where, source), **common))
        elif kind == "openIdConnect":
            url = _text(value.get("openIdConnectUrl"))
            if url is None:
                raise ManifestError("an openIdConnect scheme needs 'openIdConnectUrl'", source=source, key=where)
            schemes.append(SecurityScheme(type="openIdConnect", openid_url=url, **common))
        elif kind == "mutualTLS":
            schemes.append(SecurityScheme(type="mutualTLS", unsupported="mutual TLS client certificates", **common))
        else:
            raise ManifestError(
                f"security scheme type {kind!r} is not apiKey, http, oauth2, openIdConnect or mutualTLS",
                source=source, key=where,
            )
    return tuple(schemes)


def read_requirements(raw: Any, *, source: str, where: str) -> tuple[Requirement, ...]:
    """A ``security`` list as alternatives; ``()`` is anonymous."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ManifestError("'security' must be a list of requirement objects", source=source, key=where)
    alternatives: list[Requirement] = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ManifestError("a security requirement must be an object", source=source, key=f"{where}.{index}")
        requirement: dict[str, tuple[str, ...]] = {}
        for name, scopes in item.items():
            if scopes is not None and not isinstance(scopes, list):
                raise ManifestError(f"the scopes of {name!r} must be a list", source=source, key=f"{where}.{index}")
            requirement[str(name)] = tuple(str(s) for s in scopes or ())
        alternatives.append(requirement)
    return tuple(alternatives)


def is_anonymous(security: Sequence[Requirement]) -> bool:
    """No credential is ever needed: no alternatives, or only ``{}``."""
    return all(not alt for alt in security)
