"""A document read into a :class:`ServiceConfig`: the one way ``pincer openapi add``, hub
artifacts and config imports turn an OpenAPI document into a service."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from pincer.core.errors import ManifestError, PincerError
from pincer.runtimes.openapi.config import ServiceConfig, parse_auth
from pincer.runtimes.openapi.document import Location, Resolver
from pincer.runtimes.openapi.operations import extract_operations
from pincer.runtimes.openapi.security import OAuthFlow, SecurityScheme, read_schemes

__all__ = ["Imported", "read_service", "discover_openid"]

Fetch = Callable[[str], bytes]


@dataclass(frozen=True, kw_only=True, slots=True)
class Imported:
    service: ServiceConfig
    notes: tuple[str, ...] = ()


def discover_openid(scheme: SecurityScheme, fetch: Fetch) -> SecurityScheme:
    """An ``openIdConnect`` scheme with the flows its discovery document names (the token and
    authorization endpoints, the grant types it supports). Raises ManifestError when the
    document cannot be read."""
    assert scheme.openid_url is not None
    raw = fetch(scheme.openid_url)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ManifestError("the OpenID Connect discovery document is not JSON", source=scheme.openid_url) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("token_endpoint"), str):
        raise ManifestError("the OpenID Connect discovery document names no token_endpoint", source=scheme.openid_url)
    grants = data.get("grant_types_supported")
    # OpenID Connect Discovery 1.0: absent means ["authorization_code", "implicit"].
    supported = set(grants) if isinstance(grants, list) else {"authorization_code", "implicit"}
    scopes = tuple(str(s) for s in data.get("scopes_supported") or ()) if isinstance(data.get("scopes_supported"), list) else ()
    flows = []
    if "client_credentials" in supported:
        flows.append(OAuthFlow(kind="clientCredentials", token_url=data["token_endpoint"], scopes=scopes))
    if "authorization_code" in supported and isinstance(data.get("authorization_endpoint"), str):
        flows.append(OAuthFlow(kind="authorizationCode", token_url=data["token_endpoint"],
                               authorization_url=data["authorization_endpoint"], scopes=scopes))
    return replace(scheme, flows=tuple(flows))


def read_service(
    name: str,
    document: Mapping[str, Any],
    location: Location,
    *,
    base_url: str,
    resolver: Resolver,
    spec: str | None = None,
    auth: str | None = None,
    auth_secret: str | None = None,
    secrets: Mapping[str, str] | None = None,
    fetch: Fetch | None = None,
    keep_servers: bool = True,
) -> Imported:
    """The service ``name`` for ``document``. ``auth``/``auth_secret`` (``--auth``) send one
    credential instead of the document's schemes, with every operation the document does not
    mark anonymous; ``secrets`` renames a
    scheme's secret; ``fetch`` reads OpenID Connect discovery documents (None: not read);
    ``keep_servers`` False (a base URL given by a person) sends every operation there, even one
    whose ``servers`` name another host."""
    notes: list[str] = []
    credential = None
    if auth is not None:
        kind, param = parse_auth(auth)
        credential = (kind, param) if param else None
    schemes = read_schemes(document, service=name, source=str(location), secrets=secrets,
                           deref=lambda value: resolver.deref(value, location)[0])
    if auth is None:
        discovered = []
        for scheme in schemes:
            if scheme.type == "openIdConnect" and fetch is not None:
                try:
                    scheme = discover_openid(scheme, fetch)
                except PincerError as exc:
                    notes.append(f"scheme {scheme.key}: OpenID Connect discovery failed ({exc.message}); "
                                 f"only an access token set with `pincer secrets set {scheme.secret}` can be used")
            discovered.append(scheme)
        schemes = tuple(discovered)
    # With --auth the one credential replaces the schemes (their names are then not checked), but
    # an operation the document marks anonymous (security [] or [{}]) still goes without it.
    operations = extract_operations(resolver, credential=credential, schemes=() if auth else schemes,
                                    notes=None if auth else notes)
    if not operations:
        hint = ("its webhooks are requests the API makes, not calls a tool makes" if document.get("webhooks")
                else "a service needs at least one operation under 'paths'")
        raise ManifestError("the document has no operations", source=str(location), hint=hint)
    if not keep_servers:  # the person named the base URL: no operation goes elsewhere
        moved = [op.name for op in operations if op.server and urlsplit(op.server).scheme]
        if moved:
            notes.append(f"{len(moved)} operations name a server of their own ({', '.join(moved[:3])}"
                         f"{', ...' if len(moved) > 3 else ''}); they are sent to the base URL given instead")
        operations = [replace(op, server=None) if op.server and urlsplit(op.server).scheme else op for op in operations]
    info = document.get("info") if isinstance(document.get("info"), Mapping) else {}
    title = info.get("title") if isinstance(info, Mapping) and isinstance(info.get("title"), str) else None
    service = ServiceConfig(
        name=name,
        spec=spec or str(location),
        base_url=base_url,
        operations=tuple(operations),
        auth_secret=auth_secret,
        auth=auth,
        title=title,
        schemes=() if auth else schemes,
    )
    return Imported(service=service, notes=tuple(notes))
