"""The one egress proxy: every request of the script sandbox and of the browser leaves through it.

One core, two listeners:

- a UNIX socket (``socket_path``): the script sandbox keeps an empty network namespace, the socket
  is bind-mounted into it and ``runtimes/script/relay.py`` there carries the command's proxy
  connections to it;
- a TCP port on 127.0.0.1 (no ``socket_path``): Chromium's ``--proxy-server`` (and the canvas's
  snapshot), with ``--proxy-bypass-list=<-loopback>`` so loopback goes through it too.

Each connection is one ``CONNECT host:port`` (https, wss, any TLS) or one absolute-form request
(``GET http://host/path``). For each, under the :class:`ProxyPolicy` in force when it arrives:

1. the host must match the tool's declared allowlist (``tool_hosts``) and the grant's hosts
   (``grant_hosts``), each when given (:class:`pincer.safety.hosts.HostPattern`; a pattern without
   a port matches only ``default_ports`` when the policy names them: the sandbox's 80 and 443);
2. it is resolved here, once, and every address it has must pass the one address rule
   (:func:`pincer.safety.resolution.checked_addresses`): loopback, private, link-local, CGNAT and
   IPv6 forms embedding them are refused unless ``allow_private`` (or the origin is one of
   ``trusted_origins``: the browser's ``[builtins.browser] base_url``); cloud metadata,
   unspecified and multicast addresses are refused always;
3. the connection goes to an address that was checked, so a DNS answer cannot change between
   check and connect (Chromium never resolves a name itself behind an HTTP proxy);
4. a plain-http connection carries exactly one request: its head goes upstream with
   ``Connection: close``, exactly its body follows (:mod:`pincer.safety.http_framing`), the
   response head comes back rewritten to ``Connection: close``, and whatever the client sends
   after the first body is read and dropped, so no second request reaches the first host
   unchecked.

Every destination asked for is one :class:`EgressEvent`: allowed (with the address connected to)
or refused (with why; logged, and answered 403, or 502 when it cannot be reached, the body saying
``pincer: host:port refused: reason``). The last :data:`MAX_EVENTS_KEPT` of each kind are kept.

On anyio, which runs on asyncio too (Playwright's loop). The proxy runs in a task group its owner
holds (the script run's, the browser host's, the canvas snapshot's):
``proxy = await EgressProxy.start(task_group, policy)`` (or ``await task_group.start(proxy.serve)``),
``proxy.url`` for Chromium, ``proxy.policy = ...`` for the connections that come next,
``proxy.refusals_since(proxy.mark)``, ``await proxy.aclose()`` (stops listening, ends its
connections, returns when they are closed).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteReceiveStream, ByteStream, Listener, SocketStream, TaskGroup, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from pincer.core.errors import EgressDenied, ToolError, UsageError
from pincer.core.tasks import block_task_group
from pincer.safety.hosts import HostPattern, normalise_request_host
from pincer.safety.http_framing import BodyFramer, FramingError
from pincer.safety.resolution import checked_addresses

__all__ = [
    "CLOSED_POLICY",
    "DEFAULT_PORTS",
    "EgressEvent",
    "EgressProxy",
    "ProxyPolicy",
    "origins_of",
    "parse_allowlist",
    "proxy_task_group",
    "running_proxy",
]

logger = logging.getLogger(__name__)

PROXY_HEAD_TIMEOUT_S = 15.0  # a request head must arrive whole within this
PROXY_RESOLVE_TIMEOUT_S = 10.0
PROXY_CONNECT_TIMEOUT_S = 10.0
PROXY_RESPONSE_HEAD_TIMEOUT_S = 60.0  # a slow page's server may think a while before answering
PROXY_BODY_READ_TIMEOUT_S = 60.0  # the longest silence within one body
PROXY_LINGER_S = 2.0  # after the answer: how long the client's unread bytes are still read (and dropped)
MAX_HEAD_BYTES = 64 * 1024
MAX_EVENTS_KEPT = 200  # of each kind, allowed and refused: a busy page must not push out its refusals
DEFAULT_PORTS = (80, 443)  # the sandbox's ports for a pattern without one
_CHUNK = 65536
_HOP_HEADERS = (b"proxy-", b"connection:", b"keep-alive:")
_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}
# What a connection ending early, slowly or malformed raises; it ends that connection only.
_CONNECTION_ENDED = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.IncompleteRead,
    anyio.DelimiterNotFound,
    TimeoutError,
    FramingError,
    OSError,
)


def parse_allowlist(patterns: Iterable[str], what: str = "allowlist") -> tuple[HostPattern, ...]:
    """The patterns that parse; one that does not is left out with a warning (it matches nothing)."""
    parsed = []
    for text in patterns:
        try:
            parsed.append(HostPattern.parse(text))
        except UsageError as exc:
            logger.warning("egress proxy: ignoring %s pattern: %s", what, exc.message)
    return tuple(parsed)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyPolicy:
    """Where requests may go. ``tool_hosts``: the tool's declared allowlist (the script sandbox);
    ``grant_hosts``: the grant's hosts when it names some; None for either: no such list. A host
    must be in every list given. ``default_ports``: the ports a pattern without one matches (None:
    any port). ``trusted_origins``: (host, port) pairs the person named in config.toml, reachable
    also on a loopback or private address."""

    tool_hosts: tuple[str, ...] | None = None
    grant_hosts: tuple[str, ...] | None = None
    default_ports: tuple[int, ...] | None = None
    allow_private: bool = False
    trusted_origins: frozenset[tuple[str, int]] = frozenset()
    _tool: tuple[HostPattern, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _grant: tuple[HostPattern, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tool_hosts is not None:
            object.__setattr__(self, "_tool", parse_allowlist(self.tool_hosts, "tool allowlist"))
        if self.grant_hosts is not None:
            object.__setattr__(self, "_grant", parse_allowlist(self.grant_hosts, "grant host"))

    def host_refusal(self, host: str, port: int) -> str | None:
        """Why ``host:port`` (normalised) is outside the lists, or None."""
        if self._tool is not None and not self._matches(self._tool, host, port):
            return "not in the tool's network allowlist"
        if self._grant is not None and not self._matches(self._grant, host, port):
            allowed = ", ".join(self.grant_hosts or ()) or "none"
            return f"not in the hosts of the grant for this tool (allowed: {allowed})"
        return None

    def _matches(self, patterns: tuple[HostPattern, ...], host: str, port: int) -> bool:
        return any(p.matches(host, port, default_ports=self.default_ports) for p in patterns)

    def is_trusted(self, host: str, port: int) -> bool:
        return (host, port) in self.trusted_origins


CLOSED_POLICY = ProxyPolicy(grant_hosts=())  # nothing passes: the launch-wide proxy, a context between owners


@dataclass(frozen=True, kw_only=True, slots=True)
class EgressEvent:
    """One destination asked for: allowed (``reason`` names the address connected to) or refused
    (``reason`` says why). ``target``: ``host:port`` for a CONNECT, ``METHOD url`` for plain http;
    ``origin``: (host, port) as normalised, None when the host did not normalise."""

    target: str
    host: str
    port: int
    allowed: bool
    reason: str
    seq: int
    at: float  # time.monotonic()
    origin: tuple[str, int] | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "request": self.target,
            "host": self.host,
            "port": self.port,
            "allowed": self.allowed,
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Request:
    method: str
    target: str  # as events show it
    host: str  # as written
    port: int
    path: str
    version: str
    headers: tuple[bytes, ...]  # without hop-by-hop headers

    @property
    def connect(self) -> bool:
        return self.method.upper() == "CONNECT"


class EgressProxy:
    """One listening proxy (a UNIX socket at ``socket_path``, else a port on 127.0.0.1) with a
    replaceable :class:`ProxyPolicy`; see the module docstring."""

    def __init__(
        self, policy: ProxyPolicy = CLOSED_POLICY, *, socket_path: Path | None = None,
        head_timeout_s: float = PROXY_HEAD_TIMEOUT_S,
    ) -> None:  # fmt: skip
        self.policy = policy
        self.socket_path = socket_path
        self.head_timeout_s = head_timeout_s
        self.port = 0
        self._allowed: deque[EgressEvent] = deque(maxlen=MAX_EVENTS_KEPT)
        self._refused: deque[EgressEvent] = deque(maxlen=MAX_EVENTS_KEPT)
        self._seq = 0
        self._scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None

    @classmethod
    async def start(
        cls, task_group: TaskGroup, policy: ProxyPolicy = CLOSED_POLICY, *, socket_path: Path | None = None
    ) -> EgressProxy:
        """A proxy listening, served in ``task_group`` until :meth:`aclose` or the group ends."""
        proxy = cls(policy, socket_path=socket_path)
        await task_group.start(proxy.serve)
        return proxy

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled or :meth:`aclose`; started once the listener is open."""
        if self._scope is not None:
            raise RuntimeError("this egress proxy is already serving")
        self._stopped = anyio.Event()
        try:
            with anyio.CancelScope() as self._scope:
                listener: Listener[SocketStream]
                if self.socket_path is not None:
                    listener = await anyio.create_unix_listener(self.socket_path)
                    # The sandbox uid must be able to connect; the directory around it is private to the run.
                    os.chmod(self.socket_path, 0o666)
                else:
                    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
                    self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
                async with listener, anyio.create_task_group() as connections:
                    task_status.started()
                    await listener.serve(self._handle, task_group=connections)
        finally:
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop listening and end every connection; returns when they are closed."""
        if self._scope is None or self._stopped is None:
            return
        self._scope.cancel()
        await self._stopped.wait()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, for Chromium's ``--proxy-server`` or Playwright's ``proxy``."""
        if self.socket_path is not None or not self.port:
            raise RuntimeError("only a listening loopback proxy has a URL")
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> list[EgressEvent]:
        """The kept events, in the order they happened."""
        return sorted((*self._allowed, *self._refused), key=lambda e: e.seq)

    @property
    def mark(self) -> int:
        """A position in the events; :meth:`refusals_since` gives the refusals after it."""
        return self._seq

    def refusals_since(self, mark: int) -> list[EgressEvent]:
        return [e for e in self._refused if e.seq > mark]

    # -- one connection ---------------------------------------------------------------------------

    async def _handle(self, client: ByteStream) -> None:
        try:
            async with client:
                reader = BufferedByteReceiveStream(client)
                await self._serve_one(client, reader)
                await _linger(client, reader)
        except _CONNECTION_ENDED:
            pass
        except Exception:
            logger.exception("egress proxy: a connection failed")

    async def _serve_one(self, client: ByteStream, reader: BufferedByteReceiveStream) -> None:
        try:
            with anyio.fail_after(self.head_timeout_s):
                head = await reader.receive_until(b"\r\n\r\n", MAX_HEAD_BYTES)
        except anyio.DelimiterNotFound:
            await _answer(client, 400, f"pincer: request head too large (over {MAX_HEAD_BYTES // 1024} KiB)")
            return
        try:
            request = _parse_head(head)
        except ValueError as exc:
            await _answer(client, 400, f"pincer: malformed proxy request: {exc}")
            return
        framer = None
        if not request.connect:
            try:
                framer = BodyFramer(request.headers)
            except FramingError as exc:
                await _answer(
                    client, 400, f"pincer: {request.host}:{request.port} refused: malformed proxy request: {exc}"
                )
                return
        upstream = await self._connect(client, request)
        if upstream is None:
            return
        async with upstream:
            if framer is None:
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                async with anyio.create_task_group() as pipes:
                    pipes.start_soon(_pipe, reader, upstream)
                    pipes.start_soon(_pipe, upstream, client)
                return
            line = f"{request.method} {request.path} {request.version}".encode("latin-1")
            await upstream.send(b"\r\n".join([line, *request.headers, b"Connection: close"]) + b"\r\n\r\n")
            await _forward_body(reader, upstream, framer)
            await _answer_once(upstream, client, reader, head_only=request.method.upper() == "HEAD")

    async def _connect(self, client: ByteStream, request: _Request) -> SocketStream | None:
        policy = self.policy  # the policy in force when the request came
        try:
            host = normalise_request_host(request.host)
        except EgressDenied as exc:
            await self._refuse(client, request, exc.message)
            return None
        origin = (host, request.port)
        refusal = policy.host_refusal(host, request.port)
        if refusal is not None:
            await self._refuse(client, request, refusal, origin=origin)
            return None
        allow_private = policy.allow_private or policy.is_trusted(host, request.port)
        try:
            with anyio.fail_after(PROXY_RESOLVE_TIMEOUT_S):
                addresses = await checked_addresses(host, request.port, allow_private_network=allow_private)
        except EgressDenied as exc:
            reason = exc.message.split(" refused: ", 1)[-1]
            await self._refuse(client, request, f"{reason}; {exc.hint}" if exc.hint else reason, origin=origin)
            return None
        except (ToolError, TimeoutError) as exc:
            why = exc.message if isinstance(exc, ToolError) else f"resolving took over {PROXY_RESOLVE_TIMEOUT_S:g} s"
            await self._refuse(client, request, f"cannot resolve: {why}", status=502, origin=origin)
            return None
        for address in addresses:
            try:
                with anyio.fail_after(PROXY_CONNECT_TIMEOUT_S):
                    stream = await anyio.connect_tcp(str(address), request.port)
            except (OSError, TimeoutError):
                continue
            self._record(self._allowed, request, f"connected to {address}", origin)
            logger.debug("egress allowed: %s (connected to %s)", request.target, address)
            return stream
        await self._refuse(client, request, "connection failed", status=502, origin=origin)
        return None

    async def _refuse(
        self, client: ByteStream, request: _Request, reason: str, *, status: int = 403,
        origin: tuple[str, int] | None = None,
    ) -> None:  # fmt: skip
        self._record(self._refused, request, reason, origin)
        logger.info("egress refused: %s (%s)", request.target, reason)
        await _answer(client, status, f"pincer: {request.host}:{request.port} refused: {reason}")

    def _record(self, kept: deque[EgressEvent], request: _Request, reason: str, origin: tuple[str, int] | None) -> None:
        self._seq += 1
        kept.append(
            EgressEvent(
                target=request.target, host=request.host, port=request.port, allowed=kept is self._allowed,
                reason=reason, seq=self._seq, at=time.monotonic(), origin=origin,
            )
        )  # fmt: skip


def proxy_task_group() -> AbstractAsyncContextManager[TaskGroup]:
    """A task group for proxies that end with the block; what the block raises comes out as
    itself (:func:`pincer.core.tasks.block_task_group`: a proxy's own task never fails, each
    connection's errors end in that connection)."""
    return block_task_group()


@asynccontextmanager
async def running_proxy(
    policy: ProxyPolicy = CLOSED_POLICY, *, socket_path: Path | None = None
) -> AsyncIterator[EgressProxy]:
    """A proxy served for the block (:func:`proxy_task_group`)."""
    async with proxy_task_group() as group:
        yield await EgressProxy.start(group, policy, socket_path=socket_path)


def _parse_head(head: bytes) -> _Request:
    """The request a proxy head asks for; ValueError says what is wrong with it."""
    request_line, _, header_block = head.partition(b"\r\n")
    method, target, version = request_line.decode("latin-1").split(" ")
    if method.upper() == "CONNECT":
        host, port = _split_hostport(target, 443)
        shown, path = f"{host}:{port}", ""
    else:
        if not target.lower().startswith("http://"):
            raise ValueError("only absolute http:// requests and CONNECT are proxied")
        authority, slash, rest = target[7:].partition("/")
        host, port = _split_hostport(authority.rpartition("@")[2], 80)
        path = "/" + rest if slash else "/"
        shown = f"{method} {target[:300]}"
    kept = tuple(h for h in header_block.split(b"\r\n") if h and not h.lower().startswith(_HOP_HEADERS))
    return _Request(method=method, target=shown, host=host, port=port, path=path, version=version, headers=kept)


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


async def _answer(client: ByteStream, status: int, message: str) -> None:
    body = (message + "\n").encode()
    response = (
        f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    try:
        await client.send(response)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _linger(client: ByteStream, reader: ByteReceiveStream) -> None:
    """Close after the answer without resetting the connection: the answer ends with this end's
    EOF, and what the client still sends (a refused request's body, a second request) is read and
    dropped until it closes too, for at most :data:`PROXY_LINGER_S`. Closing a socket with unread
    bytes sends a reset, which can make the client lose the end of the answer."""
    try:
        await client.send_eof()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return
    with anyio.move_on_after(PROXY_LINGER_S):
        await _discard(reader)


async def _forward_body(client: ByteReceiveStream, upstream: ByteStream, framer: BodyFramer) -> None:
    """Exactly the first request's body, then nothing more from the client."""
    while not framer.done:
        with anyio.fail_after(PROXY_BODY_READ_TIMEOUT_S):
            data = await client.receive(_CHUNK)
        await upstream.send(framer.feed(data))


async def _answer_once(
    upstream: ByteStream, client: ByteStream, client_in: ByteReceiveStream, *, head_only: bool
) -> None:
    """The one response, its head rewritten to ``Connection: close`` so the client opens a new
    (checked) connection for its next request. Whatever the client sends meanwhile is read and
    dropped, never forwarded: an upstream answering keep-alive cannot receive a request meant for
    another host. Ends after the body (its Content-Length, else the upstream's close) or when the
    client closes."""
    up = BufferedByteReceiveStream(upstream)
    with anyio.fail_after(PROXY_RESPONSE_HEAD_TIMEOUT_S):
        head = await up.receive_until(b"\r\n\r\n", MAX_HEAD_BYTES)
    lines = [h for h in head.split(b"\r\n") if not h.lower().startswith(_HOP_HEADERS)]
    await client.send(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n")
    length = _response_length(lines, head_only=head_only)
    async with anyio.create_task_group() as both:

        async def relay() -> None:
            try:
                if length is None:
                    await _pipe(up, client)
                else:
                    await _copy(up, client, length)
            except _CONNECTION_ENDED:
                pass  # an upstream that went away or fell silent mid-body: the client sees the close
            # The answer is whole: the client is told by this end's EOF, and what it still sends is
            # dropped until it closes (:func:`_linger`), not cut off mid-read: cancelling a read
            # on a UNIX socket as the client's EOF arrives trips anyio (InvalidStateError).
            try:
                await client.send_eof()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                both.cancel_scope.cancel()
            both.cancel_scope.deadline = anyio.current_time() + PROXY_LINGER_S

        async def drop() -> None:
            await _discard(client_in)
            both.cancel_scope.cancel()

        both.start_soon(relay)
        both.start_soon(drop)


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


async def _copy(src: ByteReceiveStream, dst: ByteStream, length: int) -> None:
    """Exactly ``length`` bytes (a response body of known length)."""
    left = length
    while left > 0:
        with anyio.fail_after(PROXY_BODY_READ_TIMEOUT_S):
            data = await src.receive(min(_CHUNK, left))
        await dst.send(data)
        left -= len(data)


async def _discard(src: ByteReceiveStream) -> None:
    try:
        while True:  # an anyio stream ends by raising EndOfStream, never by returning b""
            await src.receive(_CHUNK)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _pipe(src: ByteReceiveStream, dst: ByteStream) -> None:
    try:
        while True:
            await dst.send(await src.receive(_CHUNK))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    try:
        await dst.send_eof()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


def origins_of(urls: Iterable[str]) -> frozenset[tuple[str, int]]:
    """(host, port) of each base URL, as :attr:`ProxyPolicy.trusted_origins` wants them."""
    found = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found.add((normalise_request_host(parts.hostname), port))
    return frozenset(found)
