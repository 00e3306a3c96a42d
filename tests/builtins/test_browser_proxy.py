"""The browser's egress proxy on its own, over real sockets: the rules at the proxy, a second
request smuggled on a kept-alive connection, and arbitrary request heads (hypothesis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.safety.egress_proxy import CLOSED_POLICY, EgressProxy, ProxyPolicy, _split_hostport, running_proxy

pytestmark = pytest.mark.anyio
IO_TIMEOUT_S = 10.0


class Upstream:
    """A server that ignores ``Connection: close``: it answers keep-alive and keeps reading."""

    def __init__(self) -> None:
        self.received = b""
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                self.received += data
                if data.count(b"\r\n\r\n"):
                    body = b"hello"
                    writer.write(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=60\r\n"
                                 b"Content-Length: 5\r\n\r\n" + body)  # fmt: skip
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    served = Upstream()
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        yield served
        server.close()


async def exchange(proxy: EgressProxy, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), IO_TIMEOUT_S)
    finally:
        writer.close()


async def test_a_second_request_on_a_kept_alive_connection_never_reaches_the_first_host(upstream: Upstream) -> None:
    """Before: after the first request the proxy piped the client's bytes to the first upstream
    blindly; an upstream answering keep-alive got the browser's next request, meant for another
    host (its cookies too), unchecked. Now the proxy answers ``Connection: close`` itself and
    forwards nothing after the first request's body."""
    async with running_proxy(ProxyPolicy(grant_hosts=(f"127.0.0.1:{upstream.port}",), allow_private=True)) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        first = f"GET http://127.0.0.1:{upstream.port}/a HTTP/1.1\r\nHost: 127.0.0.1:{upstream.port}\r\n\r\n"
        writer.write(first.encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IO_TIMEOUT_S)
        assert b"connection: close" in head.lower() and b"keep-alive" not in head.lower()
        writer.write(b"GET http://other.example/secret HTTP/1.1\r\nHost: other.example\r\nCookie: sid=victim\r\n\r\n")
        await writer.drain()
        await asyncio.wait_for(reader.read(), IO_TIMEOUT_S)  # the proxy closes the connection
        writer.close()
    assert b"GET /a HTTP/1.1" in upstream.received
    assert b"other.example" not in upstream.received and b"victim" not in upstream.received


async def test_a_chunked_body_is_forwarded_whole_and_nothing_after_it(upstream: Upstream) -> None:
    body = b"4\r\nname\r\n3\r\n=Ad\r\n0\r\n\r\n"
    async with running_proxy(ProxyPolicy(grant_hosts=None, allow_private=True)) as proxy:
        head = f"POST http://127.0.0.1:{upstream.port}/up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        answer = await exchange(proxy, head.encode() + body + b"GET http://other.example/ HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200") and upstream.received.endswith(body)


async def test_a_post_body_is_forwarded_by_its_length(upstream: Upstream) -> None:
    async with running_proxy(ProxyPolicy(grant_hosts=None, allow_private=True)) as proxy:
        body = b"name=Ada&plan=pro"
        answer = await exchange(
            proxy,
            f"POST http://127.0.0.1:{upstream.port}/form HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body,
        )
    assert answer.startswith(b"HTTP/1.1 200") and upstream.received.endswith(body)


@pytest.mark.parametrize(
    ("request_text", "status", "reason"),
    [
        ("CONNECT 169.254.169.254:443 HTTP/1.1\r\n\r\n", b"403", b"metadata"),
        ("GET http://10.0.0.1/ HTTP/1.1\r\n\r\n", b"403", b"private"),
        ("GET http://localhost:1/ HTTP/1.1\r\n\r\n", b"403", b"loopback"),
        ("GET /relative HTTP/1.1\r\n\r\n", b"400", b"absolute"),
        ("POST http://10.0.0.1/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", b"400", b"conflicting"),
    ],
)
async def test_the_address_rule_at_the_proxy(request_text: str, status: bytes, reason: bytes) -> None:
    async with running_proxy(ProxyPolicy(grant_hosts=None)) as proxy:
        answer = await exchange(proxy, request_text.encode())
    assert answer.split(b" ")[1] == status and reason in answer


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "replace") + b"\r\n\r\n"))
def test_arbitrary_request_heads_get_a_refusal_and_never_a_connection(data: bytes) -> None:
    async def run() -> bytes:
        async with running_proxy(CLOSED_POLICY) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(data)
            if writer.can_write_eof():
                writer.write_eof()
            answer = await asyncio.wait_for(reader.read(), IO_TIMEOUT_S)
            writer.close()
            return answer

    answer = asyncio.run(run())
    assert answer == b"" or answer.split(b" ")[1] in (b"400", b"403")


@given(st.text(max_size=80), st.integers(min_value=1, max_value=65535))
def test_split_hostport_only_raises_value_error(text: str, default: int) -> None:
    try:
        host, port = _split_hostport(text, default)
    except ValueError:
        return
    assert host and 0 < port < 65536
