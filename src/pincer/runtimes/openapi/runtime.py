"""The OpenAPI runtime: each operation of each configured service is a tool.

A call follows the HTTP rules every runtime shares (:mod:`pincer.safety.egress`): the service's
base URL host is the allowlist (a grant's host list narrows it further), https only except to
loopback when the operator allows the private network, SSRF checks, no redirects, size limits.
Parameters are serialized as the document's ``style``/``explode`` say (:mod:`.serialize`), the
body as its media type says (:mod:`.bodies`; files are read from the workspace under the file
tools' rules). Credentials are placed only where the operation's ``security`` asks
(:mod:`.security`), from the secret store, just before sending (:mod:`pincer.secrets.injection`),
and every value placed is recorded for the leak scan; the arguments never carry one.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pincer.core.capabilities import (
    Capabilities,
    CredentialLocation,
    CredentialMapping,
    EndpointPattern,
    HttpCapability,
)
from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import SecretError, ToolError, ToolNotFound, UsageError
from pincer.core.values import HostContext, HostSecrets, ToolOutput, ToolSpec
from pincer.runtimes.openapi.bodies import FileReader, encode_body
from pincer.runtimes.openapi.config import ServiceConfig, ServiceStore, host_pattern_of, parse_auth, path_prefix_of
from pincer.runtimes.openapi.operations import Operation, Parameter
from pincer.runtimes.openapi.security import Requirement, SecurityScheme, is_anonymous
from pincer.runtimes.openapi.serialize import (
    cookie_pairs,
    header_value,
    path_value,
    protect_dot_segments,
    query_pairs,
    scalar_text,
)

if TYPE_CHECKING:  # imported where a request is made: listing the tools needs no HTTP stack
    from pincer.safety import egress

logger = logging.getLogger(__name__)

__all__ = ["OpenApiRuntime", "OAuthTokens", "capabilities_for", "build_target", "build_body", "DEFAULT_MAX_REQUEST_BYTES"]

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_ERROR_BODY_CHARS = 2_000
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024  # the default of [openapi] max_request_bytes


class OAuthTokens(Protocol):
    """Access tokens for ``oauth2``/``openIdConnect`` schemes (pincer.builtins.openapi_oauth):
    a stored login's token, refreshed when it expires, or one fetched with the client
    credentials. None when the scheme has no usable credential."""

    async def access_token(
        self, service: ServiceConfig, scheme: SecurityScheme, scopes: Sequence[str], host: HostContext
    ) -> str | None: ...


def _legacy_credentials(service: ServiceConfig, host: str) -> tuple[CredentialMapping, ...]:
    """``--auth``: one credential sent with every operation."""
    if not (service.auth_secret and service.auth):
        return ()
    kind, name = parse_auth(service.auth)
    if kind == "bearer":
        location = CredentialLocation(type="bearer")
    elif kind == "header":
        location = CredentialLocation(type="header", header_name=name)
    else:
        location = CredentialLocation(type="query_param", param_name=name)
    return (CredentialMapping(key=f"{service.name}_auth", secret_name=service.auth_secret, location=location,
                              host_patterns=(host,)),)


def _schemes_of(service: ServiceConfig, security: Sequence[Requirement] | None) -> list[SecurityScheme]:
    keys = dict.fromkeys(key for alternative in security or () for key in alternative)
    return [scheme for key in keys if (scheme := service.scheme(key)) is not None]


def capabilities_for(
    service: ServiceConfig, operation: Operation | None = None, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
) -> Capabilities:
    """The operation as a capabilities manifest: the service's base URL as the allowlist, the
    secrets its security schemes may read (or the one ``--auth`` secret)."""
    base = service.base_for(operation) if operation is not None else service.base_url
    credentials = _legacy_credentials(service, host_pattern_of(base))
    allowed: tuple[str, ...] = ()
    if operation is not None and not service.sends_credential(operation):
        credentials = ()  # the document says this operation is called anonymously
    elif credentials:
        allowed = (service.auth_secret,) if service.auth_secret else ()
    elif operation is not None:
        allowed = tuple(dict.fromkeys(n for s in _schemes_of(service, operation.security) for n in s.secret_names()))
    return Capabilities(
        source=f"openapi:{service.name}",
        description=service.title,
        http=HttpCapability(
            allowlist=(EndpointPattern(host=host_pattern_of(base), path_prefix=path_prefix_of(base)),),
            credentials=credentials,
            max_request_bytes=max_request_bytes,
        ),
        secrets_allowed_names=allowed,
    )


# ------------------------------------------------------------------------------------- requests


def _path_for(operation: Operation, values: Mapping[Parameter, Any]) -> str:
    path = operation.path
    for param, value in values.items():
        if param.location != "path":
            continue
        if param.content_type:
            text = path_value("simple", False, param.name, _content_text(param, value))
        else:
            text = path_value(param.wire_style, param.explode, param.name, value)
        path = path.replace("{" + param.name + "}", text)
    if "{" in path:
        raise UsageError(f"{operation.name}: a path parameter of {operation.path} has no value")
    return protect_dot_segments(path)


def _content_text(param: Parameter, value: Any) -> str:
    """A ``content`` parameter's value as its media type (JSON for a JSON type)."""
    kind = (param.content_type or "").split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return scalar_text(value)


def build_target(service: ServiceConfig, operation: Operation, args: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The URL and headers of one call (no body, no credentials yet)."""
    values = {p: args[p.prop] for p in operation.parameters if p.prop in args}
    query: list[str] = []
    cookies: list[str] = []
    headers: dict[str, str] = {"Accept": operation.accept}
    for param, value in values.items():
        if param.content_type:
            value = _content_text(param, value)
        if param.location == "query":
            style = "form" if param.content_type else param.wire_style
            query.extend(query_pairs(style, param.explode, param.name, value, allow_reserved=param.allow_reserved))
        elif param.location == "header":
            headers[param.name] = header_value(param.explode, value)
        elif param.location == "cookie":
            cookies.extend(cookie_pairs(param.explode, param.name, value))
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    url = service.base_for(operation).rstrip("/") + _path_for(operation, values)
    if query:
        url += "?" + "&".join(query)
    return url, headers


def _workspace_reader(host: HostContext, limit: int) -> FileReader:
    """Files named in a body, read by the one opener of the file tools (no absolute path, no
    '..', no link out of the workspace, no file with a second name, none of pincer's own
    files), at most ``limit`` bytes."""
    from pincer.runtimes.native.workspace import read_in_workspace

    def read(path: str) -> tuple[str, bytes]:
        target, data, size = read_in_workspace(host, path, limit=limit)
        if size > limit:
            raise UsageError(
                f"{target.shown!r} is {size} bytes, over the {limit}-byte limit of an OpenAPI request",
                hint="raise [openapi] max_request_bytes in config.toml",
            )
        return target.parts[-1], data

    return read


def build_body(operation: Operation, args: Mapping[str, Any], read: FileReader) -> tuple[bytes, str] | None:
    """The body's bytes and Content-Type, or None when the call sends none."""
    if operation.body is None or "body" not in args:
        return None
    return encode_body(operation.body, args["body"], read)


def _pruned(value: Any, tree: Mapping[str, Any] | None) -> Any:
    """``value`` without the properties the document marks ``writeOnly`` (operations._prune_tree)."""
    if not tree:
        return value
    if isinstance(value, list):
        items = tree.get("items")
        return [_pruned(v, items) for v in value] if items else value
    if not isinstance(value, dict):
        return value
    drop = set(tree.get("drop", ()))
    props = tree.get("properties", {})
    extra = tree.get("additionalProperties")
    out = {}
    for key, item in value.items():
        if key in drop:
            continue
        sub = props.get(key) or (extra if key not in props else None)
        out[key] = _pruned(item, sub)
    return out


# ------------------------------------------------------------------------------------- runtime


class OpenApiRuntime:
    kind = RuntimeKind.OPENAPI

    def __init__(
        self,
        services: Sequence[ServiceConfig],
        *,
        tokens: OAuthTokens | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        self.services = {s.name: s for s in services if s.enabled}
        self._tokens = tokens
        self._max_request_bytes = max_request_bytes
        self._specs: dict[str, ToolSpec] = {}
        self._owners: dict[str, tuple[ServiceConfig, Operation]] = {}
        self._clients: dict[tuple[bool, bool], egress.EgressClient] = {}
        for service in self.services.values():
            for operation, name in zip(service.operations, service.tool_names(), strict=True):
                self._specs[name] = self._spec(service, operation, name)
                self._owners[name] = (service, operation)

    def _spec(self, service: ServiceConfig, operation: Operation, name: str) -> ToolSpec:
        caps = capabilities_for(service, operation, max_request_bytes=self._max_request_bytes)
        effects = {EffectKind.NETWORK}
        if operation.method not in _READ_METHODS:
            effects.add(EffectKind.EXTERNAL_WRITE)
        if caps.secrets_allowed_names:
            effects.add(EffectKind.USE_SECRET)
        if operation.body is not None and operation.body.reads_files:
            effects.add(EffectKind.READ_FILESYSTEM)
        return ToolSpec(
            name=name,
            description=operation.description,
            input_schema=operation.input_schema,
            effects=frozenset(effects),
            runtime=RuntimeKind.OPENAPI,
            side_effecting=EffectKind.EXTERNAL_WRITE in effects,
            source=f"openapi:{service.name}",
            capabilities=caps,
            annotations={"service": service.name, "method": operation.method, "path": operation.path,
                         "operation": operation.name, **({"deprecated": True} if operation.deprecated else {})},
        )

    @classmethod
    def from_home(cls, home: Path, **settings: Any) -> OpenApiRuntime:
        return cls(ServiceStore(home).load(), **settings)

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

    def tools(self) -> Sequence[ToolSpec]:
        return list(self._specs.values())

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> None:
        """Refuse before anyone is asked what the egress rule refuses anyway: a base URL whose
        scheme or address is not allowed (plain http, a private address), a host outside the grant."""
        from pincer.safety import egress

        service, operation, caps, _url, _headers, policy, target = self._prepare(spec, args, host)
        try:
            await egress.resolve_checked(target, policy)
        except ToolError:
            pass  # a name that does not resolve now is the call's own failure, reported when it runs
        if not (caps.http and caps.http.credentials):  # --auth's one credential is the chain's own preflight
            self._refuse_unset_security(service, operation, host)

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        import anyio

        from pincer.safety import egress

        service, operation, caps, url, headers, policy, _target = self._prepare(spec, args, host)
        body = None
        if operation.body is not None and "body" in args:
            read = _workspace_reader(host, self._max_request_bytes)
            encoded = await anyio.to_thread.run_sync(functools.partial(build_body, operation, args, read))
            if encoded is not None:
                body, headers["Content-Type"] = encoded
        send_url, headers = await self._inject(service, operation, url, headers, caps, host)
        request = egress.HttpRequest(method=operation.method, url=send_url, headers=tuple(headers.items()), body=body)
        key = (host.allow_private_network, host.allow_private_network)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = egress.EgressClient()
        response = await egress.send(request, policy=policy, client=client)
        return self._output(operation, response)

    def _prepare(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> tuple[Any, ...]:
        """The URL a call would reach, checked against the egress rule (nothing sent yet)."""
        from pincer.safety import egress

        owner = self._owners.get(spec.name)
        if owner is None:
            raise ToolNotFound(f"no OpenAPI tool named {spec.name!r}")
        service, operation = owner
        caps = spec.capabilities or capabilities_for(service, operation, max_request_bytes=self._max_request_bytes)
        assert caps.http is not None
        url, headers = build_target(service, operation, args)
        settings: dict[str, Any] = {
            "allow_private_network": host.allow_private_network,
            # As for the http built-in: whoever may reach loopback at all may do so without TLS.
            "allow_plain_http_loopback": host.allow_private_network,
        }
        policy = egress.EgressPolicy.from_http_capability(
            caps.http,
            max_response_bytes=min(caps.http.max_response_bytes, max(host.max_output_bytes, 1)),
            timeout_s=min(host.timeout_s, float(caps.http.timeout_secs)),
            **settings,
        )
        if host.network_hosts is not None:  # a grant's host list narrows the service's own
            egress.EgressPolicy.from_hosts(host.network_hosts, **settings).check(operation.method, url)
        target = policy.check(operation.method, url)  # refused requests never read a secret
        return service, operation, caps, url, headers, policy, target

    # -- credentials ---------------------------------------------------------------------------

    async def _inject(
        self, service: ServiceConfig, operation: Operation, url: str, headers: dict[str, str],
        caps: Capabilities, host: HostContext,
    ) -> tuple[str, dict[str, str]]:
        assert caps.http is not None
        if caps.http.credentials:  # --auth: the one credential goes with every operation
            return self._place(url, headers, caps.http.credentials, {}, host, use_store=True)
        if operation.security is None or is_anonymous(operation.security):
            return url, headers
        access = self._access(host)
        chosen = await self._choose(service, operation, operation.security, access, host)
        if not chosen:
            return url, headers
        mappings = []
        values: dict[str, str] = {}
        for scheme, value in chosen:
            mappings.append(CredentialMapping(key=scheme.key, secret_name=scheme.secret, location=_location(scheme),
                                              host_patterns=(host_pattern_of(service.base_for(operation)),)))
            values[scheme.secret] = value
        return self._place(url, headers, tuple(mappings), values, host, use_store=False)

    def _refuse_unset_security(self, service: ServiceConfig, operation: Operation, host: HostContext) -> None:
        """What ``_choose`` would refuse when the call runs, refused before anyone is asked: no
        alternative of the operation's security has every secret set. An OAuth scheme with a
        token keeper counts as set (its token is fetched or refreshed only when the call runs)."""
        security = operation.security
        if security is None or is_anonymous(security) or host.secrets is None:
            return
        for alternative in security:
            schemes = [service.scheme(key) for key in alternative]
            if all(
                scheme is not None and not scheme.unsupported
                and ((scheme.is_oauth and self._tokens is not None) or host.secrets.has(scheme.secret))
                for scheme in schemes
            ):  # fmt: skip
                return
        from pincer.secrets.access import per_person_refusal

        for alternative in security:  # a person's own credential: the error names the person and the command
            for scheme in filter(None, map(service.scheme, alternative)):
                refusal = None if scheme.unsupported else per_person_refusal(host.secrets, scheme.secret, tool=host.tool)
                if refusal is not None:
                    raise refusal
        raise SecretError(f"{operation.method} {operation.path} needs credentials: {_needs(service, security)}",
                          hint=_first_hint(service, security))

    @staticmethod
    def _access(host: HostContext) -> HostSecrets:
        access = host.secrets
        if access is None or not callable(getattr(access, "find", None)) or not callable(getattr(access, "record", None)):
            raise SecretError(
                "this operation needs a credential but the call has no access to secrets",
                hint="the dispatcher passes SecretAccess in HostContext.secrets",
            )
        return access

    async def _choose(
        self, service: ServiceConfig, operation: Operation, security: Sequence[Requirement], access: HostSecrets,
        host: HostContext,
    ) -> list[tuple[SecurityScheme, str]]:
        """The first alternative whose credentials are all there; [] for an anonymous one."""
        anonymous = False
        for alternative in security:
            if not alternative:
                anonymous = True
                continue
            found: list[tuple[SecurityScheme, str]] = []
            for key, scopes in alternative.items():
                scheme = service.scheme(key)
                value = None
                if scheme is not None and not scheme.unsupported:
                    value = await self._value(service, scheme, scopes, access, host)
                if value is None:
                    break
                found.append((scheme, value))  # type: ignore[arg-type]
            else:
                return found
        if anonymous:
            return []
        raise SecretError(f"{operation.method} {operation.path} needs credentials: {_needs(service, security)}",
                          hint=_first_hint(service, security))

    async def _value(
        self, service: ServiceConfig, scheme: SecurityScheme, scopes: Sequence[str], access: HostSecrets, host: HostContext
    ) -> str | None:
        if scheme.is_oauth and self._tokens is not None:
            token = await self._tokens.access_token(service, scheme, scopes, host)
            if token is not None:
                access.record(token)
            return token
        value = access.find(scheme.secret)
        return value or None

    @staticmethod
    def _place(
        url: str, headers: dict[str, str], mappings: tuple[CredentialMapping, ...], values: Mapping[str, str],
        host: HostContext, *, use_store: bool,
    ) -> tuple[str, dict[str, str]]:
        from pincer.secrets.injection import inject_credentials

        access = OpenApiRuntime._access(host)
        resolve = access.find if use_store else values.get
        injected = inject_credentials("", url, headers, credentials=mappings, resolve=resolve)
        for value in injected.injected:
            access.record(value)
        return injected.url, dict(injected.headers)

    # -- answers -------------------------------------------------------------------------------

    @staticmethod
    def _output(operation: Operation, response: egress.HttpResponse) -> ToolOutput:
        content_type = (response.header("content-type") or "").lower()
        text = response.body.decode("utf-8", errors="replace")
        value: Any = text
        if ("json" in content_type or text[:1] in ("{", "[")) and not response.truncated:
            try:
                value = _pruned(json.loads(text), operation.write_only) if text else None
            except json.JSONDecodeError:
                value = text
        usage = {"http_status": response.status, "truncated": response.truncated}
        if response.status >= 400:
            shown = text if len(text) <= _ERROR_BODY_CHARS else text[:_ERROR_BODY_CHARS] + "..."
            return ToolOutput(
                value=f"{operation.method} {operation.path} failed with HTTP {response.status}: {shown}",
                is_error=True,
                usage=usage,
            )
        if 300 <= response.status < 400:
            value = {"status": response.status, "location": response.header("location"), "redirect_not_followed": True}
        return ToolOutput(value=value, usage=usage)


def _location(scheme: SecurityScheme) -> CredentialLocation:
    if scheme.type == "apiKey":
        kind = {"header": "header", "query": "query_param", "cookie": "cookie"}[scheme.location or "header"]
        if kind == "header":
            return CredentialLocation(type="header", header_name=scheme.param)
        return CredentialLocation(type=kind, param_name=scheme.param)  # type: ignore[arg-type]
    if scheme.type == "http" and scheme.http_scheme == "basic":
        return CredentialLocation(type="basic")
    return CredentialLocation(type="bearer")  # http bearer, oauth2, openIdConnect


def _needs(service: ServiceConfig, security: Sequence[Requirement]) -> str:
    """The alternatives in words: "secret a and secret b, or secret c"."""
    ways = []
    for alternative in security:
        parts = []
        for key in alternative:
            scheme = service.scheme(key)
            if scheme is None:
                parts.append(f"scheme {key!r} (not declared by the document)")
            elif scheme.unsupported:
                parts.append(f"scheme {key!r} ({scheme.unsupported}, not supported)")
            else:
                parts.append(f"{scheme.summary()} from secret {scheme.secret!r}")
        ways.append(" and ".join(parts))
    return "; or ".join(ways)


def _first_hint(service: ServiceConfig, security: Sequence[Requirement]) -> str:
    for alternative in security:
        for key in alternative:
            scheme = service.scheme(key)
            if scheme is not None and not scheme.unsupported:
                return scheme.how_to_set(service.name)
    return "add the service again after fixing the document's securitySchemes (`pincer openapi add NAME --replace`)"
