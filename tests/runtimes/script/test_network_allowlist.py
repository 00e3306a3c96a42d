"""Network allowlist mode: the sandbox reaches allowlisted hosts only through the host-side proxy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pincer.core.values import HostContext
from pincer.runtimes.script import ScriptRuntime
from pincer.safety.egress_proxy import DEFAULT_PORTS, parse_allowlist
from pincer.safety.hosts import normalise_request_host

from .helpers import manifest

pytestmark = pytest.mark.anyio

FETCH = (
    "import sys, urllib.request, urllib.error\n"
    "for url in sys.argv[1:]:\n"
    "    try:\n"
    "        with urllib.request.urlopen(url, timeout=5) as r: print(url, r.status, r.read().decode())\n"
    "    except urllib.error.HTTPError as e: print(url, e.code, e.read().decode().strip())\n"
    "    except OSError as e: print(url, 'ERROR', e)\n"
)


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[1]}{self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def two_servers() -> Iterator[tuple[int, int]]:
    """Two real HTTP servers on 127.0.0.1: one the tool may reach, one it may not."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    yield servers[0].server_address[1], servers[1].server_address[1]
    for s in servers:
        s.shutdown()
        s.server_close()


def fetch_tool(allowed_port: int):
    return manifest(
        name="fetch",
        command=["/usr/bin/python3", "-c", FETCH, "{urls}"],
        input_schema={"type": "object", "properties": {"urls": {"type": "array", "items": {"type": "string"}}}},
        sandbox={"network": "allowlist", "allow_hosts": [f"127.0.0.1:{allowed_port}"]},
    )


async def test_allowed_host_passes_and_another_is_refused(settings, two_servers) -> None:
    allowed, other = two_servers
    runtime = ScriptRuntime([fetch_tool(allowed)], settings)
    urls = [f"http://127.0.0.1:{allowed}/ok", f"http://127.0.0.1:{other}/no", f"http://localhost:{allowed}/alias"]
    host = HostContext(session="agent", tool="fetch", allow_private_network=True)
    out = await runtime.invoke(runtime.tools()[0], {"urls": urls}, host)
    lines = out.value["stdout"].splitlines()
    assert lines[0] == f"{urls[0]} 200 hello from {allowed}/ok"
    assert lines[1].startswith(f"{urls[1]} 403 pincer: 127.0.0.1:{other} refused: not in the tool's network allowlist")
    assert lines[2].startswith(f"{urls[2]} 403")  # another name for the same server is still another host
    verdicts = [(e["port"], e["allowed"]) for e in out.value["network"]]
    assert verdicts == [(allowed, True), (other, False), (allowed, False)]


async def test_proxy_refuses_loopback_unless_the_grant_allows_private(settings, two_servers) -> None:
    allowed, _ = two_servers
    runtime = ScriptRuntime([fetch_tool(allowed)], settings)
    out = await runtime.invoke(
        runtime.tools()[0], {"urls": [f"http://127.0.0.1:{allowed}/"]}, HostContext(session="agent", tool="fetch")
    )
    assert "403 pincer" in out.value["stdout"]
    assert "127.0.0.1 is a loopback address" in out.value["stdout"]
    assert "[network] allow_private = true" in out.value["stdout"]  # the key that would allow it


async def test_direct_connections_bypassing_the_proxy_fail(settings, two_servers) -> None:
    allowed, _ = two_servers
    runtime = ScriptRuntime([fetch_tool(allowed)], settings)
    probe = manifest(
        name="direct",
        command=["/usr/bin/python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {allowed}), timeout=2)"],
        input_schema={"type": "object", "properties": {}},
        sandbox={"network": "allowlist", "allow_hosts": [f"127.0.0.1:{allowed}"]},
    )
    runtime = ScriptRuntime([probe], settings)
    out = await runtime.invoke(
        runtime.tools()[0], {}, HostContext(session="agent", tool="direct", allow_private_network=True)
    )
    assert out.is_error
    assert "ConnectionRefusedError" in out.value


async def test_grant_hosts_narrow_the_declared_allowlist(settings, two_servers) -> None:
    allowed, _ = two_servers
    runtime = ScriptRuntime([fetch_tool(allowed)], settings)
    host = HostContext(session="agent", tool="fetch", allow_private_network=True, network_hosts=("example.org",))
    out = await runtime.invoke(runtime.tools()[0], {"urls": [f"http://127.0.0.1:{allowed}/"]}, host)
    assert "403 pincer" in out.value["stdout"]


@pytest.mark.parametrize(
    ("patterns", "host", "port", "expected"),
    [
        (("api.example.com",), "api.example.com", 443, True),
        (("api.example.com",), "API.example.com.", 80, True),
        (("api.example.com",), "api.example.com", 8443, False),
        (("api.example.com:8443",), "api.example.com", 8443, True),
        (("api.example.com:8443",), "api.example.com", 443, False),
        (("*.example.com",), "a.b.example.com", 443, True),
        (("*.example.com",), "example.com", 443, False),
        (("*.example.com",), "badexample.com", 443, False),
        (("example.com",), "example.com.evil.net", 443, False),
    ],
)
def test_host_patterns(patterns, host, port, expected) -> None:
    """The proxy reads its allowlist with the shared matcher, 80 and 443 only for a pattern without a port."""
    name = normalise_request_host(host)
    assert any(p.matches(name, port, default_ports=DEFAULT_PORTS) for p in parse_allowlist(patterns)) is expected


async def test_grant_hosts_cannot_widen_the_declared_allowlist(settings, two_servers) -> None:
    """Failed on main: a grant's host list *replaced* the tool's declared allowlist, so a grant for
    another host let the tool reach a host its manifest never declared. A host must be in both."""
    allowed, other = two_servers
    runtime = ScriptRuntime([fetch_tool(allowed)], settings)
    grant = (f"127.0.0.1:{allowed}", f"127.0.0.1:{other}")
    host = HostContext(session="agent", tool="fetch", allow_private_network=True, network_hosts=grant)
    urls = [f"http://127.0.0.1:{allowed}/ok", f"http://127.0.0.1:{other}/undeclared"]
    out = await runtime.invoke(runtime.tools()[0], {"urls": urls}, host)
    lines = out.value["stdout"].splitlines()
    assert lines[0] == f"{urls[0]} 200 hello from {allowed}/ok"
    assert lines[1].startswith(f"{urls[1]} 403 pincer: 127.0.0.1:{other} refused: not in the tool's network allowlist")
