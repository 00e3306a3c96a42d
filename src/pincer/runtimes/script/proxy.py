"""The host-side half of the network allowlist: an HTTP proxy on a UNIX socket.

The sandbox keeps its own empty network namespace; the socket is bind-mounted into it and a relay
there (``relay.py``) carries the command's proxy connections to it. Each connection is one
``CONNECT host:port`` (HTTPS and other TLS) or one absolute-form HTTP request
(``GET http://host/path``). The host must match the allowlist; its addresses are resolved once
here and refused when private, loopback or link-local unless the grant allows private networks; the
connection goes to the address that was checked, so DNS cannot change the answer afterwards.

Allowlist patterns: ``api.example.com`` (exact), ``*.example.com`` (any subdomain, not the apex),
an optional ``:port``; without a port only 80 and 443 are allowed.

TODO(lead): switch host matching and the address checks to ``pincer.safety.egress`` once merged.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteStream, SocketStream

__all__ = ["AllowlistProxy", "ProxyEvent", "host_allowed"]

logger = logging.getLogger(__name__)

PROXY_CONNECT_TIMEOUT_S = 10.0
PROXY_HEAD_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
_DEFAULT_PORTS = (80, 443)
_CHUNK = 65536


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyEvent:
    host: str
    port: int
    allowed: bool
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "allowed": self.allowed, "reason": self.reason}


def host_allowed(patterns: Sequence[str], host: str, port: int) -> bool:
    """Whether ``host:port`` matches one of the allowlist patterns."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        name, _, port_text = pattern.lower().rpartition(":") if _has_port(pattern) else (pattern.lower(), "", "")
        ports = (int(port_text),) if port_text else _DEFAULT_PORTS
        if port not in ports:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name:
            return True
    return False


def _has_port(pattern: str) -> bool:
    head, sep, tail = pattern.rpartition(":")
    return bool(sep) and tail.isdigit() and ":" not in head


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified
    )


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
    """Serve one run's proxy socket. ``events`` records every destination asked for."""

    socket_path: Path
    hosts: tuple[str, ...]
    allow_private: bool = False
    events: list[ProxyEvent] = field(default_factory=list)

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
            upstream = await self._connect(client, host, port)
            if upstream is None:
                return
            async with upstream:
                if method.upper() == "CONNECT":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    kept = [h for h in headers.split(b"\r\n") if h and not h.lower().startswith(b"proxy-")]
                    line = f"{method} {path} {version}".encode("latin-1")
                    await upstream.send(b"\r\n".join([line, *kept]) + b"\r\n\r\n")
                if rest:
                    await upstream.send(rest)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_pipe, client, upstream)
                    tg.start_soon(_pipe, upstream, client)

    async def _connect(self, client: ByteStream, host: str, port: int) -> SocketStream | None:
        if not host_allowed(self.hosts, host, port):
            return await self._deny(client, host, port, "not in the tool's network allowlist")
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return await self._deny(client, host, port, f"cannot resolve: {exc}", status=502)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not self.allow_private and not all(_is_public(a) for a in addresses):
            return await self._deny(client, host, port, "resolves to a private or loopback address")
        for address in addresses:
            try:
                with anyio.fail_after(PROXY_CONNECT_TIMEOUT_S):
                    stream = await anyio.connect_tcp(address, port)
            except (OSError, TimeoutError):
                continue
            self.events.append(ProxyEvent(host=host, port=port, allowed=True, reason=f"connected to {address}"))
            return stream
        return await self._deny(client, host, port, "connection failed", status=502)

    async def _deny(self, client: ByteStream, host: str, port: int, reason: str, status: int = 403) -> None:
        self.events.append(ProxyEvent(host=host, port=port, allowed=False, reason=reason))
        logger.info("sandbox egress refused: %s:%d (%s)", host, port, reason)
        await _refuse(client, status, f"pincer: {host}:{port} refused: {reason}")
        return


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


async def _pipe(src: ByteStream, dst: ByteStream) -> None:
    try:
        while True:
            data = await src.receive(_CHUNK)
            await dst.send(data)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    try:
        await dst.send_eof()  # type: ignore[attr-defined]
    except (AttributeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass

