"""The script sandbox's allowlist proxy and a second request on one kept-alive connection.

Failed before the fix: after the first absolute-form request the proxy piped every further byte
of the connection to the first upstream, so a command could send ``GET http://allowed/`` and
then, on the same connection, a request with any Host (an internal name, another service's
credentials in its headers) that the allowed upstream received unchecked — and an upstream that
is itself a forwarding proxy would carry it on. Now exactly one request (head and its body,
``pincer.safety.http_framing``) is forwarded per connection."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pincer.safety.egress_proxy import DEFAULT_PORTS, EgressProxy, ProxyPolicy
from tests.safety.test_egress_proxy import Upstream, serve_upstream

pytestmark = pytest.mark.anyio
IO_TIMEOUT_S = 10.0


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[Upstream, int]]:
    async with serve_upstream() as served:
        yield served, served.port


async def test_the_sandbox_proxy_forwards_one_request_per_connection(upstream: tuple[Upstream, int]) -> None:
    served, port = upstream
    folder = Path(tempfile.mkdtemp(prefix="pincer-smuggle-"))
    proxy = EgressProxy(
        ProxyPolicy(tool_hosts=(f"127.0.0.1:{port}",), allow_private=True, default_ports=DEFAULT_PORTS),
        socket_path=folder / "p.sock",
    )
    try:
        with anyio.fail_after(IO_TIMEOUT_S * 2):
            async with anyio.create_task_group() as tg:
                await tg.start(proxy.serve)
                stream = await anyio.connect_unix(proxy.socket_path)
                async with stream:
                    await stream.send(f"GET http://127.0.0.1:{port}/a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                    got = b""
                    while b"ok" not in got:
                        got += await stream.receive()
                    await stream.send(
                        b"GET http://internal.corp/admin HTTP/1.1\r\nHost: internal.corp\r\nAuthorization: Bearer stolen\r\n\r\n"
                    )
                    with anyio.move_on_after(2):  # give a forwarded request time to arrive
                        while b"internal.corp" not in served.received:
                            await anyio.sleep(0.05)
                    # Stop the proxy before this end closes (an EOF racing the cancellation trips
                    # anyio's UNIX stream reader, as in test_sandbox_escapes.py).
                    tg.cancel_scope.cancel()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert b"GET /a HTTP/1.1" in served.received
    assert b"internal.corp" not in served.received and b"stolen" not in served.received
