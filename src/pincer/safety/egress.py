"""Outbound HTTP for every runtime that makes requests (native ``http``, WASM ``http-request``,
OpenAPI): one policy, one checked path to the network.

``send(request, policy=..., client=...)`` does, in order:

1. URL checks (:mod:`pincer.safety.urls`): https only, no userinfo, no encoded separators,
   path normalised; plain http only with ``allow_plain_http_loopback`` and only to loopback;
2. allowlist: a rule whose host pattern (exact or ``*.`` subdomain, with port), path prefix
   (matched on the normalised path) and methods admit the request;
3. header and size checks (``max_request_bytes``);
4. SSRF: the host is resolved once and every address must pass
   :func:`pincer.safety.addresses.address_refusal`;
5. the connection goes to exactly those addresses (a pinned network backend, so a second DNS
   answer cannot differ from the checked one) with TLS verified against the host name;
6. no redirect is followed (a 3xx comes back as it is); the body is read up to
   ``max_response_bytes`` and the rest dropped (``truncated``); the whole exchange is bounded
   by ``timeout_s``.

Every refusal is :class:`EgressDenied` naming the rule and what to do. ``allow_private_network``
and ``allow_plain_http_loopback`` are operator settings: nothing read from a manifest sets them.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import logging
import re
import socket
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import certifi
import httpcore

import pincer
from pincer.core.errors import EgressDenied, ToolError, ToolTimeout, UsageError
from pincer.safety.addresses import address_refusal
from pincer.safety.urls import CheckedUrl, IPAddress, check_url, normalise_host

__all__ = [
    "EgressRule",
    "EgressPolicy",
    "HttpRequest",
    "HttpResponse",
    "EgressClient",
    "CheckedUrl",
    "check_url",
    "send",
    "resolve_checked",
    "check_method",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 1_048_576  # IronClaw's defaults: 1 MB out, 10 MB in, 30 s
DEFAULT_MAX_RESPONSE_BYTES = 10_485_760
DEFAULT_TIMEOUT_S = 30.0
MAX_HEADERS = 100
READ_CHUNK_BYTES = 65_536

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_HEADER_VALUE = re.compile(r"[\r\n\x00]")
# Set by us from the checked URL and body: a caller setting them could split or smuggle requests,
# or point the Host header at another virtual host than the one we checked.
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "expect",
    }
)
# CONNECT opens a tunnel past every check here; TRACE reflects request headers (credentials) back.
_REFUSED_METHODS = frozenset({"CONNECT", "TRACE"})
_USER_AGENT = f"pincer/{pincer.__version__}"


@dataclass(frozen=True, kw_only=True, slots=True)
class EgressRule:
    """One allowlist entry. ``host``: ``api.example.com`` or ``*.example.com`` (subdomains at any
    depth, never the apex), optionally ``:port``; without a port any port matches (IronClaw's
    reading of its manifests, which name hosts only).
    ``path_prefix`` is matched against the normalised, decoded path. ``methods`` None: any."""

    host: str
    path_prefix: str = "/"
    methods: frozenset[str] | None = None
    _pattern: tuple[bool, str, int | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", _parse_host_pattern(self.host))
        if not isinstance(self.path_prefix, str) or not self.path_prefix.startswith("/"):
            raise UsageError(
                f"allowlist path prefix {self.path_prefix!r} must start with '/'",
                hint="use '/' to allow every path",
            )
        if self.methods is not None:
            object.__setattr__(self, "methods", frozenset(m.upper() for m in self.methods))

    def matches_host(self, url: CheckedUrl) -> bool:
        wildcard, host, port = self._pattern
        if isinstance(port, int) and port != url.port:
            return False
        if wildcard:
            return url.host.endswith("." + host)
        return url.host == host

    def matches_path(self, url: CheckedUrl) -> bool:
        return url.decoded_path.startswith(self.path_prefix)

    def matches_method(self, method: str) -> bool:
        return self.methods is None or method in self.methods


def _parse_host_pattern(pattern: object) -> tuple[bool, str, int | None]:
    if not isinstance(pattern, str) or not pattern:
        raise UsageError(f"allowlist host {pattern!r} must be a non-empty string")
    text = pattern.strip()
    wildcard = text.startswith("*.")
    if wildcard:
        text = text[2:]
    port: int | None = None
    if text.startswith("["):
        end = text.find("]")
        host_part, rest = (text[1:end], text[end + 1 :]) if end > 0 else (text, "")
        if rest and not rest.startswith(":"):
            raise UsageError(f"allowlist host {pattern!r} is not host[:port]")
        raw_port = rest[1:] if rest else None
    else:
        host_part, sep, raw = text.partition(":")
        raw_port = raw if sep else None
    if raw_port is not None:
        if raw_port == "*":
            port = None
        elif raw_port.isdigit() and 0 < int(raw_port) < 65536:
            port = int(raw_port)
        else:
            raise UsageError(f"allowlist host {pattern!r} has a bad port", hint="use host or host:PORT")
    if "*" in host_part:
        raise UsageError(
            f"allowlist host {pattern!r}: '*' is allowed only as a leading '*.' label",
            hint="list hosts explicitly or use *.example.com for subdomains",
        )
    try:
        if text.startswith("["):
            host = ipaddress.IPv6Address(host_part).compressed
        else:
            host, _ = normalise_host(host_part)
    except (EgressDenied, ValueError) as exc:
        raise UsageError(f"allowlist host {pattern!r} is not a valid host: {exc}") from None
    return wildcard, host, port


@dataclass(frozen=True, kw_only=True, slots=True)
class EgressPolicy:
    """Where requests may go and how big and slow they may be."""

    rules: tuple[EgressRule, ...]
    allow_private_network: bool = False
    allow_plain_http_loopback: bool = False
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_hosts(cls, hosts: Iterable[str], **settings: Any) -> EgressPolicy:
        """Any path and method on each host pattern (a grant's network allowlist)."""
        return cls(rules=tuple(EgressRule(host=h) for h in hosts), **settings)

    @classmethod
    def from_http_capability(cls, http: Any, **settings: Any) -> EgressPolicy:
        """From a capabilities ``http`` section (``allowlist`` of host / path_prefix / methods and
        its limits); ``settings`` override the limits and carry the operator-only switches."""
        rules = tuple(
            EgressRule(
                host=entry.host,
                path_prefix=getattr(entry, "path_prefix", None) or "/",
                methods=frozenset(entry.methods) if getattr(entry, "methods", None) else None,
            )
            for entry in getattr(http, "allowlist", ())
        )
        limits: dict[str, Any] = {}
        for attr, key in (
            ("max_request_bytes", "max_request_bytes"),
            ("max_response_bytes", "max_response_bytes"),
            ("timeout_secs", "timeout_s"),
        ):
            value = getattr(http, attr, None)
            if value is not None:
                limits[key] = value
        limits.update(settings)
        return cls(rules=rules, **limits)

    def check(self, method: str, url: str) -> CheckedUrl:
        """URL checks and allowlist, without touching the network. Raises EgressDenied."""
        method = check_method(method)
        target = check_url(url, allow_plain_http=self.allow_plain_http_loopback)
        if not self.rules:
            raise EgressDenied(
                f"{method} {target.display} refused: no host is allowed (rule: empty allowlist)",
                hint=f"add {target.authority!r} to the grant's network hosts",
            )
        by_host = [r for r in self.rules if r.matches_host(target)]
        if not by_host:
            allowed = ", ".join(sorted({r.host for r in self.rules}))
            raise EgressDenied(
                f"{method} {target.display} refused: host {target.authority!r} is not in the allowlist "
                f"(allowed: {allowed})",
                hint=f"add {target.authority!r} to the grant's network hosts if the tool should reach it",
            )
        by_path = [r for r in by_host if r.matches_path(target)]
        if not by_path:
            prefixes = ", ".join(sorted({r.path_prefix for r in by_host}))
            raise EgressDenied(
                f"{method} {target.display} refused: path {target.decoded_path!r} is outside the allowed "
                f"prefixes ({prefixes})",
                hint="use a path under an allowed prefix or widen the allowlist",
            )
        if not any(r.matches_method(method) for r in by_path):
            methods = ", ".join(sorted({m for r in by_path for m in (r.methods or ())}))
            raise EgressDenied(
                f"{method} {target.display} refused: method {method} is not allowed there (allowed: {methods})",
                hint="use an allowed method or widen the allowlist",
            )
        return target


def check_method(method: object) -> str:
    if not isinstance(method, str) or not _TOKEN.match(method):
        raise EgressDenied(f"HTTP method {method!r} is not a valid method token", hint="use GET, POST, PUT, ...")
    upper = method.upper()
    if upper in _REFUSED_METHODS:
        raise EgressDenied(f"HTTP method {upper} is refused (rule: no tunnels or header reflection)")
    return upper


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    truncated: bool = False

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)


# The addresses each (host, port) may connect to during one send(), set by send() in its own task.
# httpcore opens connections in the task that makes the request, so the pinned backend sees them;
# a connection attempt with no pin (anything not coming through send) is refused.
_PINS: contextvars.ContextVar[Mapping[tuple[str, int], Sequence[IPAddress]] | None] = contextvars.ContextVar(
    "pincer_egress_pins", default=None
)


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        pins = _PINS.get()
        addresses = pins.get((host.lower(), port)) if pins else None
        if not addresses:
            raise EgressDenied(
                f"connection to {host}:{port} was not checked by the egress policy",
                hint="make outbound requests through pincer.safety.egress.send",
            )
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or EgressDenied(f"no address to connect to for {host}:{port}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise EgressDenied("unix sockets are not reachable through egress", hint="use an https URL")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle costs milliseconds.
    return ssl.create_default_context(cafile=certifi.where())


class EgressClient:
    """A connection pool whose every connection goes to an address ``send`` checked.

    One client serves one policy's network settings; ``send`` refuses to mix them on one pool,
    because a kept-alive connection checked under a looser setting could otherwise be reused.
    ``ssl_context`` replaces the system CA bundle (tests with their own CA).
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, max_connections: int = 10) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or _default_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_PinnedBackend(),
        )
        self._network_settings: tuple[bool, bool] | None = None

    async def __aenter__(self) -> EgressClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._pool.aclose()

    def _bind(self, policy: EgressPolicy) -> None:
        settings = (policy.allow_private_network, policy.allow_plain_http_loopback)
        if self._network_settings is None:
            self._network_settings = settings
        elif self._network_settings != settings:
            raise UsageError(
                "this EgressClient was used with other network settings",
                hint="use one EgressClient per egress policy",
            )


async def resolve_checked(target: CheckedUrl, policy: EgressPolicy) -> tuple[IPAddress, ...]:
    """Resolve the host once and check every address; raises EgressDenied or ToolError."""
    if target.ip is not None:
        addresses: tuple[IPAddress, ...] = (target.ip,)
    else:
        try:
            infos = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ToolError(
                f"could not resolve {target.host!r}: {getattr(exc, 'strerror', None) or exc}",
                hint="check the host name",
            ) from None
        seen: dict[IPAddress, None] = {}
        for _family, _type, _proto, _canon, sockaddr in infos:
            try:
                seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
            except ValueError:
                continue
        addresses = tuple(seen)
        if not addresses:
            raise ToolError(f"{target.host!r} resolved to no usable address", hint="check the host name")
    for address in addresses:
        refusal = address_refusal(address, allow_private_network=policy.allow_private_network)
        if refusal is not None:
            via = "" if target.ip is not None else f" (resolved from {target.host!r})"
            hint = (
                "this address is never reachable from tools"
                if refusal.always
                else "private addresses are reachable only with [network] allow_private = true in config.toml"
            )
            raise EgressDenied(
                f"{target.display} refused: {address} is {refusal.reason}{via} (rule: no private network)",
                hint=hint,
            )
    if target.scheme == "http" and not all(a.is_loopback for a in addresses):
        raise EgressDenied(
            f"{target.display} refused: plain http is allowed only to loopback (rule: https only)",
            hint="use https://",
        )
    return addresses


def _request_headers(request: HttpRequest, target: CheckedUrl) -> list[tuple[bytes, bytes]]:
    if len(request.headers) > MAX_HEADERS:
        raise EgressDenied(f"{len(request.headers)} request headers; the limit is {MAX_HEADERS}")
    headers: list[tuple[bytes, bytes]] = [(b"Host", target.authority.encode("ascii"))]
    names: set[str] = set()
    for name, value in request.headers:
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise EgressDenied(f"request header name {name!r} is not a valid token", hint="use names like X-Api-Key")
        if not isinstance(value, str) or _BAD_HEADER_VALUE.search(value):
            raise EgressDenied(
                f"request header {name!r} has a value with CR, LF or NUL (rule: no header injection)",
                hint="send header values on one line",
            )
        lower = name.lower()
        if lower in _RESERVED_HEADERS:
            raise EgressDenied(
                f"request header {name!r} is set by pincer, not by tools (rule: reserved headers)",
                hint="drop it; pincer derives it from the URL and body",
            )
        names.add(lower)
        headers.append((name.encode("ascii"), value.encode("utf-8")))
    if "user-agent" not in names:
        headers.append((b"User-Agent", _USER_AGENT.encode("ascii")))
    if "accept-encoding" not in names:
        # Bodies are returned as sent; decompressing would let a small body blow past the limit.
        headers.append((b"Accept-Encoding", b"identity"))
    return headers


async def send(request: HttpRequest, *, policy: EgressPolicy, client: EgressClient | None = None) -> HttpResponse:
    """Check ``request`` against ``policy`` and perform it; see the module docstring.

    Raises EgressDenied for refusals, ToolTimeout past ``policy.timeout_s``, ToolError for
    network or protocol failures. A 3xx (or any status) is a normal HttpResponse.
    """
    target = policy.check(request.method, request.url)
    method = request.method.upper()
    headers = _request_headers(request, target)
    body = request.body
    size = len(body or b"") + sum(len(k) + len(v) + 4 for k, v in headers) + len(target.target)
    if size > policy.max_request_bytes:
        raise EgressDenied(
            f"{method} {target.display} refused: the request is {size} bytes; the limit is "
            f"{policy.max_request_bytes} (rule: max_request_bytes)",
            hint="send a smaller body",
        )
    if client is not None:
        client._bind(policy)
    try:
        with anyio.fail_after(policy.timeout_s):
            addresses = await resolve_checked(target, policy)
            if client is not None:
                return await _exchange(client, method, target, headers, body, addresses, policy)
            async with EgressClient() as own:
                return await _exchange(own, method, target, headers, body, addresses, policy)
    except TimeoutError:
        raise ToolTimeout(
            f"{method} {target.display} took longer than {policy.timeout_s:g} s",
            hint="retry later or raise the timeout",
        ) from None


async def _exchange(
    client: EgressClient,
    method: str,
    target: CheckedUrl,
    headers: list[tuple[bytes, bytes]],
    body: bytes | None,
    addresses: tuple[IPAddress, ...],
    policy: EgressPolicy,
) -> HttpResponse:
    url = httpcore.URL(
        scheme=target.scheme.encode("ascii"),
        host=target.host.encode("ascii"),
        port=target.port,
        target=target.target.encode("ascii"),
    )
    extensions: dict[str, Any] = {
        "timeout": dict.fromkeys(("connect", "read", "write", "pool"), policy.timeout_s),
    }
    token = _PINS.set({(target.host, target.port): addresses})
    try:
        async with client._pool.stream(method, url, headers=headers, content=body, extensions=extensions) as resp:
            chunks: list[bytes] = []
            received = 0
            truncated = False
            async for chunk in resp.aiter_stream():
                room = policy.max_response_bytes - received
                if len(chunk) > room:
                    chunks.append(chunk[:room])
                    truncated = True
                    break
                chunks.append(chunk)
                received += len(chunk)
            response_headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.headers)
            return HttpResponse(
                status=resp.status,
                headers=response_headers,
                body=b"".join(chunks),
                truncated=truncated,
            )
    except httpcore.TimeoutException:
        raise ToolTimeout(
            f"{method} {target.display} timed out after {policy.timeout_s:g} s", hint="retry later"
        ) from None
    except httpcore.ConnectError as exc:
        raise ToolError(
            f"{method} {target.display}: could not connect or TLS failed: {exc}",
            hint="check that the service is up and its certificate is valid for the host",
        ) from None
    except (httpcore.ProtocolError, httpcore.NetworkError) as exc:
        raise ToolError(
            f"{method} {target.display}: the connection failed: {type(exc).__name__}: {exc}",
            hint="the server closed the connection or spoke invalid HTTP; retry later",
        ) from None
    finally:
        _PINS.reset(token)
