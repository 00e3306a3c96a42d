"""The browser's one way out: an HTTP proxy on loopback inside pincer that checks every request.

Chromium is launched with ``--proxy-server`` pointing here and ``--proxy-bypass-list=<-loopback>``
(so loopback goes through it too), each browser context with a proxy of its own, so every request
of a page — navigation, subresource, frame, fetch, WebSocket — arrives as one ``CONNECT
host:port`` (https, wss) or one absolute-form request (``GET http://host/path``). For each:

1. the host must match the call's grant hosts when the grant names some
   (:class:`pincer.safety.hosts.HostPattern`: ``shop.example``, ``*.example.com``, and with a port,
   ``127.0.0.1:8080``, only that port);
2. it is resolved here, once, and every address must pass the one address rule
   (:func:`pincer.safety.resolution.checked_addresses`): loopback, private, link-local and
   metadata addresses are refused unless ``[network] allow_private`` (metadata always); the one
   origin the person wrote as ``[builtins.browser] base_url`` may also be loopback or private;
3. the connection goes to an address that was checked (Chromium never resolves a name itself
   behind an HTTP proxy), so a DNS answer cannot change between check and connect.

A refused request gets a 403 (Chromium shows an error page or fails the subresource) and a
:class:`Refusal` in :attr:`EgressProxy.refusals`, which the browser tool reports in the action
result and in ``console``. A plain-http connection carries exactly one request: it goes upstream
with ``Connection: close``, the response comes back with ``Connection: close``, and anything more
the browser sends after the first body (:mod:`pincer.safety.http_framing`) is dropped, so no
second request ever reaches the first host unchecked.

Public API (also for the canvas): ``proxy = await EgressProxy.start(policy)``, ``proxy.url``
(``http://127.0.0.1:PORT`` for Chromium's ``--proxy-server`` or Playwright's ``proxy``),
``proxy.policy = ...`` (per call), ``proxy.refusals_since(mark)``, ``await proxy.aclose()``.

Written on asyncio streams, not anyio task groups: the proxy outlives every call (it serves the
browser between calls), and Playwright, which it serves, runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from pincer.core.errors import EgressDenied, ToolError, UsageError
from pincer.safety.hosts import HostPattern, normalise_request_host
from pincer.safety.http_framing import BodyFramer, FramingError
from pincer.safety.resolution import checked_addresses

__all__ = ["ProxyPolicy", "Refusal", "EgressProxy", "CLOSED_POLICY"]

logger = logging.getLogger(__name__)

PROXY_HEAD_TIMEOUT_S = 15.0
PROXY_RESOLVE_TIMEOUT_S = 10.0
PROXY_CONNECT_TIMEOUT_S = 10.0
PROXY_RESPONSE_HEAD_TIMEOUT_S = 60.0
PROXY_BODY_READ_TIMEOUT_S = (
    60.0  # the longest silence within one body  # a slow page's server may think a while before answering
)
MAX_HEAD_BYTES = 64 * 1024
MAX_REFUSALS_KEPT = 200
_CHUNK = 65536
_HOP_HEADERS = (b"proxy-", b"connection:", b"keep-alive:")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyPolicy:
    """Where the browser may go for now. ``hosts``: the grant's host patterns (None: any host
    the address rule allows); ``trusted_origins``: (host, port) pairs the person named in
    config.toml, reachable also on a loopback or private address."""

    hosts: tuple[str, ...] | None = None
    allow_private: bool = False
    trusted_origins: frozenset[tuple[str, int]] = frozenset()
    _patterns: tuple[HostPattern, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.hosts is not None:
            parsed = []
            for text in self.hosts:
                try:
                    parsed.append(HostPattern.parse(text))
                except UsageError as exc:  # a pattern that does not parse matches nothing
                    logger.warning("browser: ignoring grant host %s", exc.message)
            object.__setattr__(self, "_patterns", tuple(parsed))

    def host_refusal(self, host: str, port: int) -> str | None:
        """Why ``host:port`` (normalised) is outside the grant's hosts, or None."""
        if self._patterns is None:
            return None
        if any(p.matches(host, port) for p in self._patterns):
            return None
        allowed = ", ".join(self.hosts or ()) or "none"
        return f"not in the hosts of the grant for this tool (allowed: {allowed})"

    def is_trusted(self, host: str, port: int) -> bool:
        return (host, port) in self.trusted_origins


CLOSED_POLICY = ProxyPolicy(hosts=())  # nothing passes: the launch-wide proxy and a context between owners


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """One refused request: what was asked for and why."""

    target: str
    reason: str
    at: float  # time.monotonic()
    seq: int
    origin: tuple[str, int] | None = None  # (host, port) as normalised: whose request it was is told by it

    def to_dict(self) -> dict[str, str]:
        return {"request": self.target, "reason": self.reason}


class EgressProxy:
    """One listening proxy on 127.0.0.1 with a replaceable :class:`ProxyPolicy`."""

    def __init__(self, policy: ProxyPolicy) -> None:
        self.policy = policy
        self.refusals: deque[Refusal] = deque(maxlen=MAX_REFUSALS_KEPT)
        self._seq = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @classmethod
    async def start(cls, policy: ProxyPolicy = CLOSED_POLICY) -> EgressProxy:
        proxy = cls(policy)
        proxy._server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        return proxy

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mark(self) -> int:
        """A position in the refusals; :meth:`refusals_since` gives those after it."""
        return self._seq

    def refusals_since(self, mark: int) -> list[Refusal]:
        return [r for r in self.refusals if r.seq > mark]

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    # -- one connection ---------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, FramingError):
            pass
        except asyncio.CancelledError:
            # Only aclose cancels these; asyncio's stream callback would log a cancelled handler
            # task as an error, so it ends normally instead.
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PROXY_HEAD_TIMEOUT_S)
        if len(head) > MAX_HEAD_BYTES:
            await _refuse(writer, 400, "request head too large")
            return
        line, _, header_block = head[:-4].partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ")
            connect = method.upper() == "CONNECT"
            if connect:
                host, port = _split_hostport(target, 443)
                shown, path = f"{host}:{port}", ""
            else:
                if not target.lower().startswith("http://"):
                    raise ValueError("only absolute http:// requests and CONNECT are proxied")
                authority, slash, rest = target[7:].partition("/")
                host, port = _split_hostport(authority.rpartition("@")[2], 80)
                path = "/" + rest if slash else "/"
                shown = f"{method} {target[:300]}"
        except ValueError as exc:
            await _refuse(writer, 400, f"malformed proxy request: {exc}")
            return
        kept = [h for h in header_block.split(b"\r\n") if h and not h.lower().startswith(_HOP_HEADERS)]
        framer = None
        if not connect:
            try:
                framer = BodyFramer(kept)
            except FramingError as exc:
                await _refuse(writer, 400, f"pincer refused {shown}: {exc}")
                return
        upstream = await self._connect(writer, host, port, shown)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        try:
            if connect:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            else:
                request = f"{method} {path} {version}".encode("latin-1")
                up_writer.write(b"\r\n".join([request, *kept, b"Connection: close"]) + b"\r\n\r\n")
                assert framer is not None
                await _forward_body(reader, up_writer, framer)
                await _answer_once(up_reader, writer, reader, head_only=method.upper() == "HEAD")
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _connect(
        self, writer: asyncio.StreamWriter, raw_host: str, port: int, shown: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        policy = self.policy
        try:
            host = normalise_request_host(raw_host)
        except EgressDenied as exc:
            await self._deny(writer, shown, exc.message)
            return None
        origin = (host, port)
        refusal = policy.host_refusal(host, port)
        if refusal is not None:
            await self._deny(writer, shown, refusal, origin=origin)
            return None
        try:
            addresses = await asyncio.wait_for(
                checked_addresses(
                    host, port, allow_private_network=policy.allow_private or policy.is_trusted(host, port)
                ),
                PROXY_RESOLVE_TIMEOUT_S,
            )
        except EgressDenied as exc:
            reason = exc.message.split(" refused: ", 1)[-1]
            await self._deny(writer, shown, f"{reason}; {exc.hint}" if exc.hint else reason, origin=origin)
            return None
        except (ToolError, TimeoutError) as exc:
            why = exc.message if isinstance(exc, ToolError) else f"resolving took over {PROXY_RESOLVE_TIMEOUT_S:g} s"
            await self._deny(writer, shown, f"cannot resolve: {why}", status=502, origin=origin)
            return None
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(str(address), port), PROXY_CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError):
                continue
        await self._deny(writer, shown, "connection failed", status=502, origin=origin)
        return None

    async def _deny(
        self, writer: asyncio.StreamWriter, shown: str, reason: str, status: int = 403,
        origin: tuple[str, int] | None = None,
    ) -> None:  # fmt: skip
        self._seq += 1
        self.refusals.append(Refusal(target=shown, reason=reason, at=time.monotonic(), seq=self._seq, origin=origin))
        logger.info("browser egress refused: %s (%s)", shown, reason)
        await _refuse(writer, status, f"pincer refused {shown}: {reason}")


def _split_hostport(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ValueError("empty host")
    if port_text and not (port_text.isascii() and port_text.isdigit()):
        raise ValueError("bad port")
    port = int(port_text) if port_text else default_port
    if not 0 < port < 65536:
        raise ValueError("port out of range")
    return host, port


async def _refuse(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _forward_body(src: asyncio.StreamReader, dst: asyncio.StreamWriter, framer: BodyFramer) -> None:
    """Exactly the first request's body (:class:`~pincer.safety.http_framing.BodyFramer`), then
    nothing more from the client."""
    while not framer.done:
        data = await asyncio.wait_for(src.read(_CHUNK), PROXY_BODY_READ_TIMEOUT_S)
        if not data:
            raise ConnectionError("request body cut short")
        dst.write(framer.feed(data))
        await dst.drain()


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter, length: int) -> None:
    """Exactly ``length`` bytes (a response body of known length)."""
    left = length
    while left > 0:
        data = await asyncio.wait_for(src.read(min(_CHUNK, left)), PROXY_BODY_READ_TIMEOUT_S)
        if not data:
            raise ConnectionError("request body cut short")
        dst.write(data)
        await dst.drain()
        left -= len(data)


async def _answer_once(
    up: asyncio.StreamReader, client: asyncio.StreamWriter, client_in: asyncio.StreamReader, *, head_only: bool
) -> None:
    """The one response, its head rewritten to ``Connection: close`` so the browser opens a new
    (checked) connection for its next request. Whatever the client sends meanwhile is read and
    dropped, never forwarded: an upstream answering keep-alive cannot receive a request meant
    for another host. Ends after the body (its Content-Length, else the upstream's close) or
    when the client closes."""
    head = await asyncio.wait_for(up.readuntil(b"\r\n\r\n"), PROXY_RESPONSE_HEAD_TIMEOUT_S)
    if len(head) > MAX_HEAD_BYTES:
        raise ConnectionError("response head too large")
    lines = [h for h in head[:-4].split(b"\r\n") if not h.lower().startswith(_HOP_HEADERS)]
    client.write(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n")
    await client.drain()
    length = _response_length(lines, head_only=head_only)
    relay = asyncio.ensure_future(_pipe(up, client) if length is None else _copy(up, client, length))
    drain = asyncio.ensure_future(_discard(client_in))
    try:
        await asyncio.wait({relay, drain}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (relay, drain):
            task.cancel()
        await asyncio.gather(relay, drain, return_exceptions=True)


def _response_length(lines: list[bytes], *, head_only: bool) -> int | None:
    """A response body's length when the head says it (None: read to the upstream's close)."""
    parts = lines[0].split(b" ") if lines else []
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if 100 <= status < 200:
        return None  # an interim response: the final one follows on the same stream
    if head_only or status in (204, 304):
        return 0
    chunked = False
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key, text = name.strip().lower(), value.strip()
        if key == b"transfer-encoding":
            chunked = True
        elif key == b"content-length" and text.isdigit() and len(text) <= 15:
            length = int(text)
    return None if chunked else length


async def _discard(src: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while await src.read(_CHUNK):
            pass


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, OSError):
        pass
    with contextlib.suppress(Exception):
        if dst.can_write_eof():
            dst.write_eof()


def origins_of(urls: Iterable[str]) -> frozenset[tuple[str, int]]:
    """(host, port) of each base URL, as :attr:`ProxyPolicy.trusted_origins` wants them."""
    from urllib.parse import urlsplit

    found = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found.add((normalise_request_host(parts.hostname), port))
    return frozenset(found)
