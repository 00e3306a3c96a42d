"""The transport of outbound HTTP: the SSRF rule at connect time and the one checked path to the
network, for every runtime that makes requests (native ``http``, WASM ``http-request``, OpenAPI).

``send(request, policy=..., client=...)`` does, in order:

1. :meth:`EgressPolicy.check` (:mod:`pincer.safety.egress_policy`): URL checks, allowlist;
2. header and size checks (``max_request_bytes``);
3. SSRF: the host is resolved once and every address must pass
   :func:`pincer.safety.addresses.address_refusal` (:func:`checked_addresses`, which the script
   sandbox's proxy uses too);
4. the connection goes to exactly those addresses (a pinned network backend, so a second DNS
   answer cannot differ from the checked one) with TLS verified against the host name;
5. no redirect is followed (a 3xx comes back as it is); the body is read up to
   ``max_response_bytes`` and the rest dropped (``truncated``); the whole exchange is bounded
   by ``timeout_s``.

Every refusal is :class:`EgressDenied` naming the rule and what to do.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import certifi
import httpcore2

import pincer
from pincer.core.errors import EgressDenied, ToolError, ToolTimeout, UsageError
from pincer.safety.egress_policy import TOKEN, EgressPolicy, HttpRequest, HttpResponse
from pincer.safety.resolution import checked_addresses, resolve_checked
from pincer.safety.urls import CheckedUrl, IPAddress
from pincer.telemetry import spans
from pincer.telemetry.tracing import TRACING, trace_headers

__all__ = ["EgressClient", "send", "default_ssl_context", "resolve_checked", "checked_addresses", "MAX_HEADERS", "READ_CHUNK_BYTES"]

logger = logging.getLogger(__name__)

MAX_HEADERS = 100
READ_CHUNK_BYTES = 65_536

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
_USER_AGENT = f"pincer/{pincer.__version__}"



# The addresses each (host, port) may connect to during one send(), set by send() in its own task.
# httpcore2 opens connections in the task that makes the request, so the pinned backend sees them;
# a connection attempt with no pin (anything not coming through send) is refused.
_PINS: contextvars.ContextVar[Mapping[tuple[str, int], Sequence[IPAddress]] | None] = contextvars.ContextVar(
    "pincer_egress_pins", default=None
)


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
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
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        raise last or EgressDenied(f"no address to connect to for {host}:{port}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise EgressDenied("unix sockets are not reachable through egress", hint="use an https URL")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """certifi's CA bundle: what every outbound HTTPS connection pincer makes trusts (egress, the hub, OpenAPI fetches)."""
    # Built once: loading the CA bundle costs milliseconds.
    return ssl.create_default_context(cafile=certifi.where())


class EgressClient:
    """A connection pool whose every connection goes to an address ``send`` checked.

    One client serves one policy's network settings; ``send`` refuses to mix them on one pool,
    because a kept-alive connection checked under a looser setting could otherwise be reused.
    ``ssl_context`` replaces the system CA bundle (tests with their own CA).
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, max_connections: int = 10) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context or default_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_PinnedBackend(),
        )
        self._network_settings: tuple[bool, bool, frozenset[tuple[str, str, int]]] | None = None

    @property
    def network_settings(self) -> tuple[bool, bool, frozenset[tuple[str, str, int]]] | None:
        """The policy's network settings this client serves (None before its first request): a
        client pins connections by them, so it serves one set only."""
        return self._network_settings

    async def __aenter__(self) -> EgressClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._pool.aclose()

    def _bind(self, policy: EgressPolicy) -> None:
        settings = (policy.allow_private_network, policy.allow_plain_http_loopback, policy.trusted_origins)
        if self._network_settings is None:
            self._network_settings = settings
        elif self._network_settings != settings:
            raise UsageError(
                "this EgressClient was used with other network settings",
                hint="use one EgressClient per egress policy",
            )


def _request_headers(request: HttpRequest, target: CheckedUrl) -> list[tuple[bytes, bytes]]:
    if len(request.headers) > MAX_HEADERS:
        raise EgressDenied(f"{len(request.headers)} request headers; the limit is {MAX_HEADERS}")
    headers: list[tuple[bytes, bytes]] = [(b"Host", target.authority.encode("ascii"))]
    names: set[str] = set()
    for name, value in request.headers:
        if not isinstance(name, str) or not TOKEN.match(name):
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
    if TRACING.on:
        return await _traced(method, target, headers, lambda sent: _perform(method, target, sent, body, policy, client))
    return await _perform(method, target, headers, body, policy, client)


async def _traced(
    method: str,
    target: CheckedUrl,
    headers: list[tuple[bytes, bytes]],
    perform: Callable[[list[tuple[bytes, bytes]]], Awaitable[HttpResponse]],
) -> HttpResponse:
    """The request under a client span, carrying the trace context unless the caller set its own."""
    with spans.upstream_http_span(method, scheme=target.scheme, host=target.host, port=target.port) as span:
        names = {name.lower() for name, _ in headers}
        sent = headers + [
            (name.encode("ascii"), value.encode("ascii"))
            for name, value in trace_headers().items()
            if name.encode("ascii") not in names
        ]
        response = await perform(sent)
        spans.end_upstream_http(span, response.status)
        return response


async def _perform(
    method: str,
    target: CheckedUrl,
    headers: list[tuple[bytes, bytes]],
    body: bytes | None,
    policy: EgressPolicy,
    client: EgressClient | None,
) -> HttpResponse:
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
    url = httpcore2.URL(
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
    except httpcore2.TimeoutException:
        raise ToolTimeout(
            f"{method} {target.display} timed out after {policy.timeout_s:g} s", hint="retry later"
        ) from None
    except httpcore2.ConnectError as exc:
        raise ToolError(
            f"{method} {target.display}: could not connect or TLS failed: {exc}",
            hint="check that the service is up and its certificate is valid for the host",
        ) from None
    except (httpcore2.ProtocolError, httpcore2.NetworkError) as exc:
        raise ToolError(
            f"{method} {target.display}: the connection failed: {type(exc).__name__}: {exc}",
            hint="the server closed the connection or spoke invalid HTTP; retry later",
        ) from None
    finally:
        _PINS.reset(token)
