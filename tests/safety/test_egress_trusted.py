"""A base URL written in config.toml (``EgressPolicy.trusted_origins``) opens exactly its scheme,
host and port to loopback, private addresses and plain http; nothing else gains from it."""

from __future__ import annotations

import pytest

from pincer.core.errors import EgressDenied
from pincer.safety.egress import EgressPolicy, EgressRule, HttpRequest, send
from tests.localservers import serve

pytestmark = pytest.mark.anyio


def _policy(port: int, *rules: str) -> EgressPolicy:
    hosts = rules or (f"127.0.0.1:{port}",)
    return EgressPolicy(rules=tuple(EgressRule(host=h) for h in hosts), trusted_origins=frozenset({("http", "127.0.0.1", port)}))


async def test_the_trusted_origin_is_reachable_over_plain_http_on_loopback() -> None:
    with serve() as server:
        response = await send(HttpRequest(method="GET", url=server.url("/echo")), policy=_policy(server.port))
    assert response.status == 200


async def test_another_port_on_loopback_stays_refused() -> None:
    with serve() as server, serve() as other:
        policy = _policy(server.port, f"127.0.0.1:{server.port}", f"127.0.0.1:{other.port}")
        with pytest.raises(EgressDenied, match="scheme 'http' refused"):
            await send(HttpRequest(method="GET", url=other.url("/echo")), policy=policy)
        assert other.requests == []


async def test_the_same_port_under_another_name_stays_refused() -> None:
    """localhost resolves to 127.0.0.1, but the person named 127.0.0.1: the origin differs."""
    with serve() as server:
        policy = _policy(server.port, f"127.0.0.1:{server.port}", f"localhost:{server.port}")
        with pytest.raises(EgressDenied):
            await send(HttpRequest(method="GET", url=server.url("/echo", host="localhost")), policy=policy)
        assert server.requests == []


@pytest.mark.parametrize("url", ["https://10.0.0.9/", "https://169.254.169.254/latest/meta-data/", "https://192.168.1.1:8443/"])
async def test_other_private_addresses_stay_refused(url: str) -> None:
    policy = EgressPolicy(
        rules=(EgressRule(host="10.0.0.9"), EgressRule(host="169.254.169.254"), EgressRule(host="192.168.1.1")),
        trusted_origins=frozenset({("http", "127.0.0.1", 8080), ("https", "10.0.0.8", 443)}),
    )
    with pytest.raises(EgressDenied, match="rule: no private network"):
        await send(HttpRequest(method="GET", url=url), policy=policy)


async def test_a_metadata_address_is_refused_even_when_named() -> None:
    policy = EgressPolicy(rules=(EgressRule(host="169.254.169.254"),), trusted_origins=frozenset({("http", "169.254.169.254", 80)}))
    with pytest.raises(EgressDenied, match="metadata"):
        await send(HttpRequest(method="GET", url="http://169.254.169.254/latest/"), policy=policy)
