"""The host-side half of the network allowlist: an HTTP proxy on a UNIX socket.

The sandbox keeps its own empty network namespace; the socket is bind-mounted into it and a relay
there (``relay.py``) carries the command's proxy connections to it. Each connection is one
``CONNECT host:port`` (HTTPS and other TLS) or one absolute-form HTTP request
(``GET http://host/path``). The rules are the ones every egress path shares (``pincer.safety``):

- the host must match a pattern of the allowlist (:class:`pincer.safety.hosts.HostPattern`:
  ``api.example.com``, ``*.example.com``, an optional ``:port``; without a port only 80 and 443);
- it is resolved here, once, and *every* address it has must pass
  :func:`pincer.safety.addresses.address_refusal` (:func:`pincer.safety.resolution.checked_addresses`):
  loopback, private, link-local, CGNAT and IPv6 forms embedding them are refused unless the grant
  allows private networks; cloud metadata, unspecified and multicast addresses are refused always;
- the connection goes to an address that was checked, so DNS cannot change the answer afterwards;
- an absolute-form connection carries exactly one request (:mod:`pincer.safety.http_framing`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteStream, SocketStream

from pincer.core.errors import EgressDenied, ToolError, UsageError
from pincer.safety.hosts import HostPattern, normalise_request_host
from pincer.safety.http_framing import BodyFramer, FramingError
from pincer.safety.resolution import checked_addresses

__all__ = ["AllowlistProxy", "ProxyEvent", "parse_allowlist"]

logger = logging.getLogger(__name__)

PROXY_CONNECT_TIMEOUT_S = 10.0
PROXY_RESOLVE_TIMEOUT_S = 10.0
PROXY_HEAD_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
DEFAULT_PORTS = (80, 443)
PROXY_BODY_READ_TIMEOUT_S = 60.0  # the longest silence within one request body
_CHUNK = 65536
_HOP_HEADERS = (b"proxy-", b"connection:", b"keep-alive:")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyEvent:
    host: str
    port: int
    allowed: bool
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "allowed": self.allowed, "reason": self.reason}


def parse_allowlist(patterns: Iterable[str]) -> tuple[HostPattern, ...]:
    """The patterns that parse; one that does not is left out with a warning (it matches nothing)."""
    parsed = []
    for text in patterns:
        try:
            parsed.append(HostPattern.parse(text))
        except UsageError as exc:
            logger.warning("sandbox allowlist: ignoring %s", exc.message)
    return tuple(parsed)


def _split_hostport(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ValueError("empty host")
    port = int(port_text) if port_text else default_port
    if not 0 < port < 65536:
        raise ValueError("port out of range")
    return host, port


@dataclass(kw_only=True)
class AllowlistProxy:
    """Serve one run's proxy socket. ``hosts``: the tool's declared allowlist; ``grant_hosts``: the
    grant's host list when it names one, which narrows the declared list (a host must be in both).
    ``events`` records every destination asked for."""

    socket_path: Path
    hosts: tuple[str, ...]
    grant_hosts: tuple[str, ...] | None = None
    allow_private: bool = False
    events: list[ProxyEvent] = field(default_factory=list)
    _patterns: tuple[HostPattern, ...] = field(init=False, repr=False)
    _granted: tuple[HostPattern, ...] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._patterns = parse_allowlist(self.hosts)
        self._granted = None if self.grant_hosts is None else parse_allowlist(self.grant_hosts)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_unix_listener(self.socket_path)
        # The sandbox uid must be able to connect; the directory around it is private to the run.
        os.chmod(self.socket_path, 0o666)
        async with listener:
            task_status.started()
            await listener.serve(self._handle)

    async def _handle(self, client: ByteStream) -> None:
        async with client:
            try:
                with anyio.fail_after(PROXY_HEAD_TIMEOUT_S):
                    head, rest = await _read_head(client)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            try:
                request_line, _, headers = head.partition(b"\r\n")
                method, target, version = request_line.decode("latin-1").split(" ")
                if method.upper() == "CONNECT":
                    host, port = _split_hostport(target, 443)
                    path = ""
                else:
                    if not target.lower().startswith("http://"):
                        raise ValueError("only absolute http:// requests and CONNECT are proxied")
                    authority, slash, path_rest = target[7:].partition("/")
                    host, port = _split_hostport(authority, 80)
                    path = slash + path_rest if slash else "/"
            except ValueError as exc:
                await _refuse(client, 400, f"malformed proxy request: {exc}")
                return
            kept = [h for h in headers.split(b"\r\n") if h and not h.lower().startswith(_HOP_HEADERS)]
            framer = None
            if method.upper() != "CONNECT":
                try:
                    framer = BodyFramer(kept)
                except FramingError as exc:
                    await _refuse(client, 400, f"malformed proxy request: {exc}")
                    return
            upstream = await self._connect(client, host, port)
            if upstream is None:
                return
            async with upstream:
                if framer is None:
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if rest:
                        await upstream.send(rest)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_pipe, client, upstream)
                        tg.start_soon(_pipe, upstream, client)
                    return
                # Exactly one request per connection: its head and its body, then the response.
                # Bytes after the body (a second request, for any host) are read and dropped, never
                # forwarded to this upstream (tests/adversarial/test_proxy_smuggling.py).
                line = f"{method} {path} {version}".encode("latin-1")
                await upstream.send(b"\r\n".join([line, *kept, b"Connection: close"]) + b"\r\n\r\n")
                try:
                    await _send_body(client, upstream, framer, rest)
                except (
                    TimeoutError,
                    FramingError,
                    anyio.EndOfStream,
                    anyio.BrokenResourceError,
                    anyio.ClosedResourceError,
                ):
                    return  # a body cut short, too slow or malformed: nothing more is forwarded
                async with anyio.create_task_group() as tg:

                    async def relay() -> None:
                        await _pipe(upstream, client)
                        tg.cancel_scope.cancel()

                    async def drop() -> None:
                        await _discard(client)
                        tg.cancel_scope.cancel()

                    tg.start_soon(relay)
                    tg.start_soon(drop)

    async def _connect(self, client: ByteStream, host: str, port: int) -> SocketStream | None:
        try:
            name = normalise_request_host(host)
        except EgressDenied as exc:
            await self._deny(client, host, port, exc.message)
            return None
        if not any(p.matches(name, port, default_ports=DEFAULT_PORTS) for p in self._patterns):
            await self._deny(client, host, port, "not in the tool's network allowlist")
            return None
        if self._granted is not None and not any(p.matches(name, port, default_ports=DEFAULT_PORTS) for p in self._granted):
            await self._deny(client, host, port, "not in the hosts of the grant for this tool")
            return None
        try:
            with anyio.fail_after(PROXY_RESOLVE_TIMEOUT_S):
                addresses = await checked_addresses(name, port, allow_private_network=self.allow_private)
        except EgressDenied as exc:
            reason = exc.message.split(" refused: ", 1)[-1]
            await self._deny(client, host, port, f"{reason}; {exc.hint}" if exc.hint else reason)
            return None
        except (ToolError, TimeoutError) as exc:
            reason = exc.message if isinstance(exc, ToolError) else f"resolving took over {PROXY_RESOLVE_TIMEOUT_S:g} s"
            await self._deny(client, host, port, f"cannot resolve: {reason}", status=502)
            return None
        for address in addresses:
            try:
                with anyio.fail_after(PROXY_CONNECT_TIMEOUT_S):
                    stream = await anyio.connect_tcp(str(address), port)
            except (OSError, TimeoutError):
                continue
            self.events.append(ProxyEvent(host=host, port=port, allowed=True, reason=f"connected to {address}"))
            return stream
        await self._deny(client, host, port, "connection failed", status=502)
        return None

    async def _deny(self, client: ByteStream, host: str, port: int, reason: str, status: int = 403) -> None:
        self.events.append(ProxyEvent(host=host, port=port, allowed=False, reason=reason))
        logger.info("sandbox egress refused: %s:%d (%s)", host, port, reason)
        await _refuse(client, status, f"pincer: {host}:{port} refused: {reason}")


async def _read_head(stream: ByteStream) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD_BYTES:
            raise ValueError("request head too large")
        buf += await stream.receive(_CHUNK)
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


async def _refuse(client: ByteStream, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode()
    response = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    try:
        await client.send(response)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


async def _send_body(client: ByteStream, upstream: ByteStream, framer: BodyFramer, rest: bytes) -> None:
    if rest:
        await upstream.send(framer.feed(rest))
    while not framer.done:
        with anyio.fail_after(PROXY_BODY_READ_TIMEOUT_S):
            data = await client.receive(_CHUNK)
        await upstream.send(framer.feed(data))


async def _discard(src: ByteStream) -> None:
    try:
        while await src.receive(_CHUNK):
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _pipe(src: ByteStream, dst: ByteStream) -> None:
    try:
        while True:
            data = await src.receive(_CHUNK)
            await dst.send(data)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    try:
        await dst.send_eof()
    except (AttributeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass

