"""The OpenAPI runtime: each operation of each configured service is a tool.

A call follows the HTTP rules every runtime shares (:mod:`pincer.safety.egress`): the service's
base URL host is the allowlist (a grant's host list narrows it further), https only except to
loopback when the operator allows the private network, SSRF checks, no redirects, size limits.
The service's credential is injected from the secret store just before sending
(:mod:`pincer.secrets.injection`) and every injected value is recorded for the leak scan; the
arguments never carry it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from pincer.core.capabilities import (
    Capabilities,
    CredentialLocation,
    CredentialMapping,
    EndpointPattern,
    HttpCapability,
)
from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import SecretError, ToolError, ToolNotFound, UsageError
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.runtimes.openapi.config import ServiceConfig, ServiceStore, parse_auth, tool_name
from pincer.runtimes.openapi.operations import Operation

logger = logging.getLogger(__name__)

__all__ = ["OpenApiRuntime", "capabilities_for", "build_request"]

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_ERROR_BODY_CHARS = 2_000


def capabilities_for(service: ServiceConfig) -> Capabilities:
    """The service as a capabilities manifest: its base URL as the allowlist, its credential."""
    credentials: tuple[CredentialMapping, ...] = ()
    if service.auth_secret and service.auth:
        kind, name = parse_auth(service.auth)
        if kind == "bearer":
            location = CredentialLocation(type="bearer")
        elif kind == "header":
            location = CredentialLocation(type="header", header_name=name)
        else:
            location = CredentialLocation(type="query_param", param_name=name)
        credentials = (
            CredentialMapping(
                key=f"{service.name}_auth",
                secret_name=service.auth_secret,
                location=location,
                host_patterns=(service.host_pattern,),
            ),
        )
    return Capabilities(
        source=f"openapi:{service.name}",
        description=service.title,
        http=HttpCapability(
            allowlist=(EndpointPattern(host=service.host_pattern, path_prefix=service.path_prefix),),
            credentials=credentials,
        ),
        secrets_allowed_names=(service.auth_secret,) if service.auth_secret else (),
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def build_request(
    service: ServiceConfig, operation: Operation, args: Mapping[str, Any]
) -> tuple[str, dict[str, str], bytes | None]:
    """URL, headers and body for one call (no credentials yet)."""
    path = operation.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {"Accept": "application/json"}
    for param in operation.parameters:
        if param.prop not in args:
            continue
        value = args[param.prop]
        if param.location == "path":
            path = path.replace("{" + param.name + "}", quote(_text(value), safe=""))
        elif param.location == "query":
            if isinstance(value, list) and param.explode:
                query.extend((param.name, _text(v)) for v in value)
            elif isinstance(value, list):
                query.append((param.name, ",".join(_text(v) for v in value)))
            else:
                query.append((param.name, _text(value)))
        else:
            headers[param.name] = _text(value)
    if "{" in path:
        raise UsageError(f"{operation.name}: a path parameter of {operation.path} has no value")
    url = service.base_url.rstrip("/") + path
    if query:
        url += "?" + urlencode(query)
    body: bytes | None = None
    if operation.body_type is not None and "body" in args:
        value = args["body"]
        headers["Content-Type"] = operation.body_type
        if operation.body_type == "application/x-www-form-urlencoded" and isinstance(value, Mapping):
            body = urlencode({k: _text(v) for k, v in value.items()}).encode()
        elif operation.body_type == "text/plain":
            body = _text(value).encode("utf-8")
        else:
            body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return url, headers, body


class OpenApiRuntime:
    kind = RuntimeKind.OPENAPI

    def __init__(self, services: Sequence[ServiceConfig]) -> None:
        self.services = {s.name: s for s in services if s.enabled}
        self._specs: dict[str, ToolSpec] = {}
        self._owners: dict[str, tuple[ServiceConfig, Operation]] = {}
        self._clients: dict[tuple[bool, bool], Any] = {}
        for service in self.services.values():
            caps = capabilities_for(service)
            for operation in service.operations:
                name = tool_name(service.name, operation.name)
                if name in self._specs:
                    logger.warning("OpenAPI service %s: two operations are named %s; keeping the first",
                                   service.name, name)
                    continue
                effects = {EffectKind.NETWORK}
                if operation.method not in _READ_METHODS:
                    effects.add(EffectKind.EXTERNAL_WRITE)
                if service.auth_secret:
                    effects.add(EffectKind.USE_SECRET)
                self._specs[name] = ToolSpec(
                    name=name,
                    description=operation.description,
                    input_schema=operation.input_schema,
                    effects=frozenset(effects),
                    runtime=RuntimeKind.OPENAPI,
                    side_effecting=EffectKind.EXTERNAL_WRITE in effects,
                    source=f"openapi:{service.name}",
                    capabilities=caps,
                    annotations={"service": service.name, "method": operation.method, "path": operation.path,
                                 **({"deprecated": True} if operation.deprecated else {})},
                )
                self._owners[name] = (service, operation)

    @classmethod
    def from_home(cls, home: Path) -> OpenApiRuntime:
        return cls(ServiceStore(home).load())

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

        _service, _operation, _caps, _headers, _body, policy, target = self._prepare(spec, args, host)
        try:
            await egress.resolve_checked(target, policy)
        except ToolError:
            return  # a name that does not resolve now is the call's own failure, reported when it runs

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        from pincer.safety import egress

        _service, operation, caps, headers, body, policy, target = self._prepare(spec, args, host)
        send_url, headers = self._inject(operation.method, target.url, headers, caps, host)
        request = egress.HttpRequest(method=operation.method, url=send_url, headers=tuple(headers.items()), body=body)
        key = (host.allow_private_network, host.allow_private_network)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = egress.EgressClient()
        response = await egress.send(request, policy=policy, client=client)
        return self._output(operation, response)

    def _prepare(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> tuple[Any, ...]:
        """The request a call would send, checked against the egress rule (nothing sent yet)."""
        from pincer.safety import egress

        owner = self._owners.get(spec.name)
        if owner is None:
            raise ToolNotFound(f"no OpenAPI tool named {spec.name!r}")
        service, operation = owner
        caps = spec.capabilities or capabilities_for(service)
        assert caps.http is not None
        url, headers, body = build_request(service, operation, args)
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
        return service, operation, caps, headers, body, policy, target

    @staticmethod
    def _inject(
        method: str, url: str, headers: dict[str, str], caps: Capabilities, host: HostContext
    ) -> tuple[str, dict[str, str]]:
        assert caps.http is not None
        if not caps.http.credentials:
            return url, headers
        access = host.secrets
        # SecretAccess.find: the value of an allowed secret or None, recorded for the leak scan.
        resolve = getattr(access, "find", None) or getattr(access, "resolve", None)
        record = getattr(access, "record", None)
        if not callable(resolve) or not callable(record):
            raise SecretError(
                "this service needs a credential but the call has no access to secrets",
                hint="the dispatcher passes SecretAccess in HostContext.secrets",
            )
        from pincer.secrets.injection import inject_credentials

        injected = inject_credentials(method, url, headers, credentials=caps.http.credentials, resolve=resolve)
        for value in injected.injected:
            record(value)
        return injected.url, dict(injected.headers)

    @staticmethod
    def _output(operation: Operation, response: Any) -> ToolOutput:
        content_type = (response.header("content-type") or "").lower()
        text = response.body.decode("utf-8", errors="replace")
        value: Any = text
        if ("json" in content_type or text[:1] in ("{", "[")) and not response.truncated:
            try:
                value = json.loads(text) if text else None
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
