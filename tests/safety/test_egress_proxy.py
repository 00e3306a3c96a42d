"""Attacks on the one egress proxy (pincer.safety.egress_proxy), each over BOTH of its listeners:
the UNIX socket the script sandbox reaches and the loopback port Chromium is pointed at. Before
the merge each proxy had some of these tests and not others; now every one runs against the
one core through each way in. Real sockets, real upstream servers, a real resolver (a DNS
server of the test's own in a private network namespace for the rebinding attack)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from pincer.safety.egress_proxy import EgressProxy, ProxyPolicy, origins_of, proxy_task_group

pytestmark = pytest.mark.anyio

IO_TIMEOUT_S = 30.0  # a refusal or an answer comes at once; this only bounds a broken proxy
SMUGGLE_WAIT_S = 2.0  # how long a forwarded second request is given to arrive
SUBPROCESS_TIMEOUT_S = 120.0
LISTENERS = ("unix", "tcp")


@pytest.fixture(params=LISTENERS)
def listener(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory for the UNIX socket (paths must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="pincer-egress-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Upstream:
    """A server that answers every request head keep-alive and records every byte and connection."""

    def __init__(self) -> None:
        self.received = b""
        self.connections = 0
        self.port = 0

    async def handle(self, stream: SocketStream) -> None:
        self.connections += 1
        async with stream:
            try:
                while True:
                    data = await stream.receive()
                    self.received += data
                    if b"\r\n\r\n" in data:
                        await stream.send(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass


@asynccontextmanager
async def serve_upstream() -> AsyncIterator[Upstream]:
    served = Upstream()
    server = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    served.port = server.extra(anyio.abc.SocketAttribute.local_port)
    async with server, anyio.create_task_group() as tg:
        tg.start_soon(server.serve, served.handle)
        yield served
        tg.cancel_scope.cancel()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with serve_upstream() as served:
        yield served


class Served:
    """A proxy and the client connections made to it, closed only after the proxy has stopped:
    a UNIX-socket read cancelled just as the client's EOF arrives trips anyio's stream reader
    (InvalidStateError in a loop callback; tests/adversarial/test_sandbox_escapes.py does the same)."""

    def __init__(self, proxy: EgressProxy) -> None:
        self.proxy = proxy
        self.clients: list[SocketStream] = []

    async def connect(self) -> SocketStream:
        if self.proxy.socket_path is not None:
            stream: SocketStream = await anyio.connect_unix(self.proxy.socket_path)
        else:
            stream = await anyio.connect_tcp("127.0.0.1", self.proxy.port)
        self.clients.append(stream)
        return stream


@asynccontextmanager
async def serving(listener: str, socket_dir: Path, policy: ProxyPolicy, **options: float) -> AsyncIterator[Served]:
    served: Served | None = None
    try:
        async with proxy_task_group() as group:
            proxy = EgressProxy(policy, socket_path=socket_dir / "p.sock" if listener == "unix" else None, **options)
            await group.start(proxy.serve)
            served = Served(proxy)
            yield served
    finally:
        for client in served.clients if served is not None else ():
            await client.aclose()


async def read_to_end(stream: SocketStream) -> bytes:
    data = b""
    with anyio.fail_after(IO_TIMEOUT_S):
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data


async def ask(served: Served, data: bytes) -> bytes:
    """Send ``data``, then this end's EOF, and read the whole answer."""
    stream = await served.connect()
    await stream.send(data)
    await stream.send_eof()
    return await read_to_end(stream)


async def tunnel_status(served: Served, target: str) -> tuple[bytes, bytes]:
    """``CONNECT target``: (status, the answer so far); a tunnel stays open, so only its head is read."""
    stream = await served.connect()
    await stream.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    data = b""
    with anyio.fail_after(IO_TIMEOUT_S):
        while not (data.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in data):
            try:
                data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    return data.split(b" ")[1], data


# -- a second request after the first body ----------------------------------------------------------


async def test_a_request_smuggled_after_the_first_body_never_reaches_the_upstream(
    listener: str, socket_dir: Path, upstream: Upstream
) -> None:
    """The first request's body and a second request in one write: the upstream receives the first
    request and exactly its body; the second (another host, a credential) is dropped."""
    body = b"name=Ada"
    first = (
        f"POST http://127.0.0.1:{upstream.port}/form HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    second = b"GET http://internal.corp/admin HTTP/1.1\r\nHost: internal.corp\r\nAuthorization: Bearer stolen\r\n\r\n"
    policy = ProxyPolicy(grant_hosts=(f"127.0.0.1:{upstream.port}",), allow_private=True)
    async with serving(listener, socket_dir, policy) as served:
        stream = await served.connect()
        await stream.send(first + second)
        answer = await read_to_end(stream)
        with anyio.move_on_after(SMUGGLE_WAIT_S):  # give a forwarded request time to arrive
            while b"internal.corp" not in upstream.received:
                await anyio.sleep(0.05)
    head = answer.partition(b"\r\n\r\n")[0].lower()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok"), answer
    assert b"connection: close" in head and b"keep-alive" not in head
    assert upstream.received.endswith(b"\r\n\r\n" + body), upstream.received
    assert b"internal.corp" not in upstream.received and b"stolen" not in upstream.received
    assert upstream.connections == 1


async def test_a_second_request_sent_after_the_answer_is_dropped_too(
    listener: str, socket_dir: Path, upstream: Upstream
) -> None:
    policy = ProxyPolicy(grant_hosts=(f"127.0.0.1:{upstream.port}",), allow_private=True)
    async with serving(listener, socket_dir, policy) as served:
        stream = await served.connect()
        await stream.send(f"GET http://127.0.0.1:{upstream.port}/a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        got = b""
        with anyio.fail_after(IO_TIMEOUT_S):
            while not got.endswith(b"ok"):
                got += await stream.receive()
        await stream.send(
            b"GET http://other.example/secret HTTP/1.1\r\nHost: other.example\r\nCookie: sid=victim\r\n\r\n"
        )
        rest = await read_to_end(stream)  # the proxy ends the connection after the one answer
        with anyio.move_on_after(SMUGGLE_WAIT_S):
            while b"other.example" not in upstream.received:
                await anyio.sleep(0.05)
    assert rest == b""
    assert b"GET /a HTTP/1.1" in upstream.received
    assert b"other.example" not in upstream.received and b"victim" not in upstream.received


# -- the address rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("10.0.0.1:443", b"10.0.0.1 is a private address"),
        ("[fd00::1]:443", b"is a private address"),
        ("100.64.0.1:443", b"shared (CGNAT"),
        ("[::ffff:127.0.0.1]:443", b"loopback"),
        ("0.0.0.0:443", b"unspecified"),
    ],
)
async def test_connect_to_a_refused_address_is_refused(
    listener: str, socket_dir: Path, target: str, reason: bytes
) -> None:
    async with serving(listener, socket_dir, ProxyPolicy()) as served:
        status, answer = await tunnel_status(served, target)
        events = served.proxy.events
    assert status == b"403" and reason in answer, answer
    assert [(e.allowed, e.port) for e in events] == [(False, 443)]


async def test_loopback_is_refused_unless_private_networks_are_allowed(
    listener: str, socket_dir: Path, upstream: Upstream
) -> None:
    target = f"127.0.0.1:{upstream.port}"
    async with serving(listener, socket_dir, ProxyPolicy()) as served:
        refused, answer = await tunnel_status(served, target)
        plain = await ask(served, f"GET http://localhost:{upstream.port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    assert refused == b"403" and b"loopback" in answer and b"[network] allow_private = true" in answer
    assert plain.split(b" ")[1] == b"403" and b"loopback" in plain
    assert upstream.connections == 0
    async with serving(listener, socket_dir, ProxyPolicy(allow_private=True)) as served:
        allowed, _ = await tunnel_status(served, target)
        events = served.proxy.events
    assert allowed == b"200" and upstream.connections == 1
    assert [(e.allowed, e.reason) for e in events] == [(True, "connected to 127.0.0.1")]


async def test_a_trusted_origin_opens_that_origin_only(listener: str, socket_dir: Path, upstream: Upstream) -> None:
    """The browser's ``[builtins.browser] base_url``: that one (host, port) may be loopback, no other."""
    policy = ProxyPolicy(trusted_origins=frozenset({("127.0.0.1", upstream.port)}))
    async with serving(listener, socket_dir, policy) as served:
        other, answer = await tunnel_status(served, f"127.0.0.1:{upstream.port + 1 if upstream.port < 65535 else 1}")
        trusted, _ = await tunnel_status(served, f"127.0.0.1:{upstream.port}")
    assert other == b"403" and b"loopback" in answer
    assert trusted == b"200" and upstream.connections == 1


@pytest.mark.parametrize("target", ["169.254.169.254:80", "100.100.100.200:80", "[fd00:ec2::254]:80"])
async def test_metadata_is_refused_always(listener: str, socket_dir: Path, target: str) -> None:
    """Whatever the policy: private networks allowed, the address named as a trusted origin, the
    host in both allowlists."""
    host, _, port = target.rpartition(":")
    bare = host.strip("[]")
    policy = ProxyPolicy(
        tool_hosts=(host,), grant_hosts=(host,), allow_private=True, trusted_origins=frozenset({(bare, int(port))})
    )
    async with serving(listener, socket_dir, policy) as served:
        status, answer = await tunnel_status(served, target)
        plain = await ask(served, f"GET http://{target}/latest/meta-data/ HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert status == b"403" and b"cloud metadata endpoint" in answer and b"never reachable" in answer, answer
    assert plain.split(b" ")[1] == b"403" and b"cloud metadata endpoint" in plain


# -- the request head ----------------------------------------------------------------------------------


async def test_an_oversized_head_is_refused_and_never_forwarded(
    listener: str, socket_dir: Path, upstream: Upstream
) -> None:
    head = f"GET http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
    filler = b"X-Filler: " + b"a" * (64 * 1024) + b"\r\n\r\n"
    policy = ProxyPolicy(allow_private=True)
    async with serving(listener, socket_dir, policy) as served:
        answer = await ask(served, head + filler)
        events = served.proxy.events
    assert answer.split(b" ")[1] == b"400" and b"request head too large" in answer, answer[:200]
    assert upstream.connections == 0 and events == []


async def test_a_head_just_under_the_limit_passes(listener: str, socket_dir: Path, upstream: Upstream) -> None:
    """The other side of the limit: a large head that fits is forwarded."""
    start = f"GET http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: ".encode()
    head = start + b"a" * (64 * 1024 - len(start) - 8) + b"\r\n\r\n"
    async with serving(listener, socket_dir, ProxyPolicy(allow_private=True)) as served:
        answer = await ask(served, head)
    assert answer.startswith(b"HTTP/1.1 200") and upstream.connections == 1


async def test_a_slow_head_is_cut_off(listener: str, socket_dir: Path, upstream: Upstream) -> None:
    """A client that never finishes its head holds a connection only for the head timeout (here
    0.5 s; the wait below only bounds a proxy that never cuts it)."""
    policy = ProxyPolicy(allow_private=True)
    async with serving(listener, socket_dir, policy, head_timeout_s=0.5) as served:
        stream = await served.connect()
        await stream.send(f"GET http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: 127".encode())
        answer = await read_to_end(stream)  # fails after IO_TIMEOUT_S if the proxy waits on
    assert answer == b"" and upstream.connections == 0


# -- DNS rebinding -------------------------------------------------------------------------------------

_REBINDING = textwrap.dedent(
    r"""
    import json, struct, sys
    from pathlib import Path
    import anyio
    from pincer.safety.egress_proxy import EgressProxy, ProxyPolicy, proxy_task_group

    PUBLIC, LOOPBACK = bytes([93, 184, 216, 34]), bytes([127, 0, 0, 1])

    class Rebinder:
        # A DNS server answering the first A query for the name with a public address and every
        # later one with loopback (TTL 0): a resolver that asked twice would get loopback second.
        def __init__(self):
            self.a_queries = 0

        def answer(self, query):
            ident, qdcount = query[:2], struct.unpack("!H", query[4:6])[0]
            end = 12
            while query[end]:
                end += query[end] + 1
            question = query[12 : end + 5]
            qtype = struct.unpack("!H", query[end + 1 : end + 3])[0]
            records = b""
            if qtype == 1:
                self.a_queries += 1
                address = PUBLIC if self.a_queries == 1 else LOOPBACK
                records = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + address
            count = 1 if records else 0
            return ident + b"\x81\x80" + struct.pack("!HHHH", qdcount, count, 0, 0) + question + records

        async def serve(self, udp):
            async for packet, client in udp:
                await udp.sendto(self.answer(packet), *client)

    async def upstream_server(counter):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

        async def handle(stream):
            counter["connections"] += 1
            await stream.aclose()

        return listener, handle

    async def one(listener_kind, request):
        rebinder, counter = Rebinder(), {"connections": 0}
        udp = await anyio.create_udp_socket(local_host="127.0.0.1", local_port=53)
        async with udp, proxy_task_group() as group:
            group.start_soon(rebinder.serve, udp)
            server, handle = await upstream_server(counter)
            port = server.extra(anyio.abc.SocketAttribute.local_port)
            group.start_soon(server.serve, handle)
            path = Path(sys.argv[1]) / "p.sock" if listener_kind == "unix" else None
            proxy = EgressProxy(ProxyPolicy(grant_hosts=("*.pincer.test:*",)), socket_path=path)
            await group.start(proxy.serve)
            client = await (anyio.connect_unix(path) if path else anyio.connect_tcp("127.0.0.1", proxy.port))
            async with client:
                await client.send(request.format(port=port).encode())
                answer = b""
                with anyio.fail_after(60):
                    try:
                        while not answer.startswith(b"HTTP/1.1 200"):
                            answer += await client.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        pass
                group.cancel_scope.cancel()  # the proxy stops before this end closes (see Served)
        return {"answer": answer.decode(errors="replace"), "a_queries": rebinder.a_queries, **counter}

    async def main():
        results = {}
        for kind in ("unix", "tcp"):
            results[kind + " connect"] = await one(kind, "CONNECT rebind.pincer.test:{port} HTTP/1.1\r\n\r\n")
            results[kind + " http"] = await one(
                kind, "GET http://rebind.pincer.test:{port}/ HTTP/1.1\r\nHost: rebind.pincer.test\r\n\r\n"
            )
        print(json.dumps(results))

    anyio.run(main)
    """
)


def test_a_rebinding_name_is_connected_to_at_the_address_that_was_checked(socket_dir: Path) -> None:
    """A name whose first DNS answer is public and whose next ones are loopback: the proxy checks
    the first and connects to exactly that address (unreachable in the test's empty network
    namespace: 502), never asking again, so the loopback server behind the second answer gets no
    connection. Runs in a private network and mount namespace whose resolv.conf points at the
    test's DNS server (root: this project's machines run the tests as root)."""
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it does on this project's machines): it makes a network namespace")
    os.chmod(socket_dir, 0o755)
    (socket_dir / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:5 attempts:1\n")
    (socket_dir / "hosts").write_text("127.0.0.1 localhost\n")
    script = socket_dir / "rebinding.py"
    script.write_text(_REBINDING)
    done = subprocess.run(
        ["unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c",
         'ip link set lo up && mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts'
         ' && exec "$3" "$4" "$5"', "sh",
         str(socket_dir / "resolv.conf"), str(socket_dir / "hosts"), sys.executable, str(script), str(socket_dir)],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert set(results) == {"unix connect", "unix http", "tcp connect", "tcp http"}
    for name, result in results.items():
        assert result["answer"].startswith("HTTP/1.1 502"), (name, result)
        assert "connection failed" in result["answer"], (name, result)
        assert result["a_queries"] >= 1 and result["connections"] == 0, (name, result)


# -- the host lists ------------------------------------------------------------------------------------


async def test_a_host_outside_the_tools_allowlist_is_refused_before_any_lookup(
    listener: str, socket_dir: Path, upstream: Upstream
) -> None:
    policy = ProxyPolicy(tool_hosts=("api.example.com",), allow_private=True)
    async with serving(listener, socket_dir, policy) as served:
        status, answer = await tunnel_status(served, f"127.0.0.1:{upstream.port}")
        events = served.proxy.events
    assert status == b"403" and b"not in the tool's network allowlist" in answer, answer
    assert upstream.connections == 0
    assert [(e.allowed, e.origin) for e in events] == [(False, ("127.0.0.1", upstream.port))]


@pytest.mark.parametrize(
    ("grant", "shown"), [(("a.example.com", "b.example.com:8443"), b"a.example.com, b.example.com:8443"), ((), b"none")]
)
async def test_a_host_outside_the_grant_is_refused_naming_the_hosts_it_allows(
    listener: str, socket_dir: Path, upstream: Upstream, grant: tuple[str, ...], shown: bytes
) -> None:
    policy = ProxyPolicy(grant_hosts=grant, allow_private=True)
    async with serving(listener, socket_dir, policy) as served:
        plain = await ask(served, f"GET http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert plain.split(b" ")[1] == b"403", plain
    assert b"not in the hosts of the grant for this tool (allowed: " + shown + b")" in plain
    assert upstream.connections == 0


async def test_a_pattern_that_does_not_parse_is_left_out_with_a_warning(
    listener: str, socket_dir: Path, upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    """It matches nothing; the patterns beside it still work."""
    policy = ProxyPolicy(grant_hosts=("*", f"127.0.0.1:{upstream.port}"), allow_private=True)
    assert "ignoring grant host pattern" in caplog.text and "'*'" in caplog.text
    async with serving(listener, socket_dir, policy) as served:
        status, _ = await tunnel_status(served, f"127.0.0.1:{upstream.port}")
    assert status == b"200" and upstream.connections == 1


# -- malformed requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        (b"GET https://example.com/ HTTP/1.1\r\n\r\n", b"400", b"only absolute http:// requests and CONNECT"),
        (b"GET /relative HTTP/1.1\r\nHost: example.com\r\n\r\n", b"400", b"only absolute http:// requests"),
        (b"CONNECT :443 HTTP/1.1\r\n\r\n", b"400", b"empty host"),
        (b"GET http:///path HTTP/1.1\r\n\r\n", b"400", b"empty host"),
        (b"CONNECT example.com:44x HTTP/1.1\r\n\r\n", b"400", b"bad port"),
        (b"CONNECT example.com:\xd9\xa1 HTTP/1.1\r\n\r\n", b"400", b"bad port"),  # a non-ASCII digit
        (b"CONNECT example.com:0 HTTP/1.1\r\n\r\n", b"400", b"port out of range"),
        (b"GET http://example.com:65536/ HTTP/1.1\r\n\r\n", b"400", b"port out of range"),
        (b"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", b"403", b"IPv6 zone identifiers are refused"),
        (b"CONNECT [fe80::zz]:443 HTTP/1.1\r\n\r\n", b"403", b"is not a valid IPv6 address"),
    ],
)
async def test_a_malformed_request_is_answered_with_what_is_wrong(
    listener: str, socket_dir: Path, head: bytes, status: bytes, message: bytes
) -> None:
    async with serving(listener, socket_dir, ProxyPolicy(allow_private=True)) as served:
        answer = await ask(served, head)
        events = served.proxy.events
    assert answer.split(b" ")[1] == status and message in answer, answer
    # A head that does not parse names no destination; one that does is a refused destination.
    assert [e.allowed for e in events] == ([] if status == b"400" else [False])


# -- the one response ------------------------------------------------------------------------------------


@asynccontextmanager
async def scripted_upstream(response: bytes, *, close: bool) -> AsyncIterator[Upstream]:
    """A server that reads one request head, sends ``response``, then closes or keeps the
    connection open (silent) until the test ends."""
    served = Upstream()
    server = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    served.port = server.extra(anyio.abc.SocketAttribute.local_port)
    hold = anyio.Event()

    async def handle(stream: SocketStream) -> None:
        served.connections += 1
        async with stream:
            with anyio.fail_after(IO_TIMEOUT_S):
                while b"\r\n\r\n" not in served.received:
                    served.received += await stream.receive()
            await stream.send(response)
            if not close:
                await hold.wait()

    async with server, anyio.create_task_group() as tg:
        tg.start_soon(server.serve, handle)
        yield served
        hold.set()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("method", "response"),
    [
        # A HEAD's response says the length of a body it never sends.
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
        ("GET", b"HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\n\r\n"),
        ("GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"),
    ],
)
async def test_a_response_without_a_body_ends_at_its_head(
    listener: str, socket_dir: Path, method: str, response: bytes
) -> None:
    """The upstream keeps the connection open after the head: the proxy must not wait for a body
    (read_to_end fails after IO_TIMEOUT_S if it does)."""
    async with scripted_upstream(response, close=False) as upstream:
        policy = ProxyPolicy(allow_private=True)
        async with serving(listener, socket_dir, policy) as served:
            request = f"{method} http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            answer = await ask(served, request.encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(response.split(b"\r\n")[0]) and b"Connection: close" in head, answer
    assert body == b""


@pytest.mark.parametrize(
    "response",
    [
        # Chunked wins over a Content-Length (RFC 9112 6.3): read to the upstream's close.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        # An interim response: the final one follows on the same stream.
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        # No length at all: the body ends with the connection.
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello",
    ],
)
async def test_a_body_of_no_stated_length_is_relayed_to_the_upstreams_close(
    listener: str, socket_dir: Path, response: bytes
) -> None:
    async with scripted_upstream(response, close=True) as upstream:
        policy = ProxyPolicy(allow_private=True)
        async with serving(listener, socket_dir, policy) as served:
            request = f"POST http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
            answer = await ask(served, request.encode())
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert b"Connection: close" in head
    assert rest == response.partition(b"\r\n\r\n")[2], answer  # all of it, to the upstream's close


# -- the proxy's own life ----------------------------------------------------------------------------------


async def test_a_proxy_serves_once_and_has_a_url_only_on_a_loopback_port(socket_dir: Path) -> None:
    idle = EgressProxy()
    await idle.aclose()  # never started: nothing to stop
    with pytest.raises(RuntimeError, match="only a listening loopback proxy has a URL"):
        _ = idle.url
    async with proxy_task_group() as group:
        tcp = await EgressProxy.start(group)
        assert tcp.url == f"http://127.0.0.1:{tcp.port}"
        with pytest.raises(RuntimeError, match="already serving"):
            await tcp.serve()
        unix = await EgressProxy.start(group, socket_path=socket_dir / "p.sock")
        with pytest.raises(RuntimeError, match="only a listening loopback proxy has a URL"):
            _ = unix.url
        await tcp.aclose()
        await unix.aclose()


def test_origins_of_base_urls() -> None:
    found = origins_of(
        ["https://Example.COM/app", "http://127.0.0.1:8080/", "http://[::1]/", "file:///tmp/x", "https://xn--bcher-kva.example"]
    )
    assert found == frozenset(
        {("example.com", 443), ("127.0.0.1", 8080), ("::1", 80), ("xn--bcher-kva.example", 443)}
    )
