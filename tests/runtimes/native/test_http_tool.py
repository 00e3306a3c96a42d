"""The http built-in against real HTTP servers on 127.0.0.1:0."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pincer.core.capabilities import Capabilities
from pincer.core.errors import ArgumentsInvalid, EgressDenied, SecretError, ToolTimeout, UsageError
from pincer.core.values import HostContext
from pincer.runtimes.native.builtins import builtin_runtime
from tests.localservers import LocalServer, serve

pytestmark = pytest.mark.anyio

SHORT_TOOL_TIMEOUT_S = 0.3  # the /slow route waits far longer than this


def _host(**settings: Any) -> HostContext:
    return HostContext(session="main", tool="http", **settings)


def _local(server: LocalServer, **settings: Any) -> HostContext:
    base: dict[str, Any] = {"network_hosts": ("127.0.0.1",), "allow_private_network": True}
    base.update(settings)
    return _host(**base)


async def http(args: dict[str, Any], host: HostContext) -> Any:
    runtime = builtin_runtime()
    spec = next(s for s in runtime.tools() if s.name == "http")
    return (await runtime.invoke(spec, args, host)).value


async def test_get_returns_status_headers_and_body() -> None:
    with serve() as server:
        result = await http({"url": server.url("/echo?q=1")}, _local(server))
    assert result["status"] == 200 and result["encoding"] == "utf-8" and not result["truncated"]
    assert result["url"] == server.url("/echo?q=1")
    assert result["headers"]["content-type"] == "application/json"
    body = json.loads(result["body"])
    assert body["method"] == "GET" and body["path"] == "/echo?q=1"
    assert body["headers"]["User-Agent"].startswith("pincer/")


async def test_methods_headers_and_bodies() -> None:
    with serve() as server:
        posted = await http(
            {"url": server.url("/echo"), "method": "post", "json": {"a": [1, "é"]}, "headers": {"X-Trace": "t1"}},
            _local(server),
        )
        put = await http({"url": server.url("/echo"), "method": "PUT", "body": "plain text"}, _local(server))
        head = await http({"url": server.url("/echo"), "method": "HEAD"}, _local(server))
    sent = json.loads(posted["body"])
    assert sent["method"] == "POST" and json.loads(sent["body"]) == {"a": [1, "é"]}
    assert sent["headers"]["Content-Type"] == "application/json" and sent["headers"]["X-Trace"] == "t1"
    assert json.loads(put["body"])["body"] == "plain text"
    assert head["status"] == 200 and head["body"] == ""
    assert [r.method for r in server.requests] == ["POST", "PUT", "HEAD"]


async def test_binary_body_comes_back_as_base64() -> None:
    with serve() as server:
        result = await http({"url": server.url("/binary")}, _local(server))
    assert result["encoding"] == "base64" and base64.b64decode(result["body"]) == bytes(range(256))


async def test_response_truncated_at_the_output_limit() -> None:
    with serve() as server:
        result = await http({"url": server.url("/bytes?n=50000")}, _local(server, max_output_bytes=2000))
    assert result["truncated"] and result["body"] == "a" * 2000


async def test_loopback_refused_without_allow_private_network() -> None:
    with serve() as server, pytest.raises(EgressDenied, match="loopback"):
        await http({"url": server.url("/echo")}, _local(server, allow_private_network=False))
    assert server.requests == []


@pytest.mark.parametrize("hosts", [None, ()])
async def test_no_hosts_in_the_grant_means_no_requests(hosts: tuple[str, ...] | None) -> None:
    with serve() as server, pytest.raises(EgressDenied, match="no host is allowed") as info:
        await http({"url": server.url("/echo")}, _local(server, network_hosts=hosts))
    assert "grant" in (info.value.hint or "") and server.requests == []


async def test_hosts_outside_the_grant_are_refused() -> None:
    with serve() as server:
        host = _local(server, network_hosts=(f"127.0.0.1:{server.port + 1}", "api.example.com"))
        with pytest.raises(EgressDenied, match="not in the allowlist"):
            await http({"url": server.url("/echo")}, host)
        with pytest.raises(EgressDenied, match="not in the allowlist"):
            await http({"url": "https://evil.example.net/"}, host)
    assert server.requests == []


async def test_redirect_to_another_host_is_not_followed() -> None:
    with serve() as other, serve() as server:
        # The grant even allows the other server: redirects are never followed, whatever the target.
        host = _local(server, network_hosts=("127.0.0.1",))
        result = await http({"url": server.url(f"/redirect?to={other.url('/echo')}")}, host)
    assert result["status"] == 302 and result["redirect_not_followed"] == other.url("/echo")
    assert other.requests == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://10.1.2.3/", "private"),
        ("https://[::1]/", "loopback"),
        ("https://[::ffff:127.0.0.1]/", "loopback"),
        ("https://2130706433/", "numeric"),
        ("https://0x7f000001/", "numeric"),
        ("https://127.0.0.1@evil.example/", "userinfo"),
        ("https://example.com/a/%2e%2e/b", "%2e%2e"),
        ("https://example.com/a%2fb", "%2f"),
        ("https://example.com/a%5cb", "%5c"),
        ("ftp://example.com/", "https only"),
    ],
)
async def test_url_tricks_are_refused(url: str, message: str) -> None:
    hosts = ("169.254.169.254", "10.1.2.3", "[::1]", "[::ffff:127.0.0.1]", "example.com", "evil.example", "127.0.0.1")
    with pytest.raises(EgressDenied, match=message):
        await http({"url": url}, _host(network_hosts=hosts))


async def test_decimal_loopback_refused_even_where_loopback_is_allowed() -> None:
    host = _host(network_hosts=("127.0.0.1",), allow_private_network=True)
    for url in ("http://2130706433/", "http://127.1/", "http://0x7f000001/"):
        with pytest.raises(EgressDenied, match="numeric"):
            await http({"url": url}, host)


async def test_metadata_refused_even_with_private_network() -> None:
    with pytest.raises(EgressDenied, match="metadata"):
        await http(
            {"url": "https://169.254.169.254/"}, _host(network_hosts=("169.254.169.254",), allow_private_network=True)
        )


async def test_argument_errors() -> None:
    host = _host(network_hosts=("example.com",))
    with pytest.raises(UsageError, match="either body or json"):
        await http({"url": "https://example.com/", "body": "a", "json": {"a": 1}}, host)
    with pytest.raises(ArgumentsInvalid, match="url"):
        await http({}, host)
    with pytest.raises(EgressDenied, match="not a valid method"):
        await http({"url": "https://example.com/", "method": "GET /x"}, host)
    with pytest.raises(EgressDenied, match="unusable"):
        await http({"url": "https://example.com/"}, _host(network_hosts=("*",)))


async def test_the_tool_timeout_applies() -> None:
    with serve() as server, pytest.raises(ToolTimeout):
        await http({"url": server.url("/slow")}, _local(server, timeout_s=SHORT_TOOL_TIMEOUT_S))


def _caps(port: int, *, optional: bool = False) -> Capabilities:
    return Capabilities.from_json(
        {
            "http": {
                "allowlist": [{"host": "127.0.0.1"}],
                "credentials": {
                    "api": {
                        "secret_name": "api_token",
                        "location": {"type": "bearer"},
                        "host_patterns": [f"127.0.0.1:{port}"],
                        "optional": optional,
                    }
                },
            },
            "secrets": {"allowed_names": ["api_token"]},
        },
        source="test.capabilities.json",
    )


async def test_credentials_are_injected_and_recorded(tmp_path: Any) -> None:
    from pincer.secrets.store import SecretAccess, SecretStore

    token = "tok-4f8a1c9e7b2d"
    with SecretStore.open(tmp_path, key=b"k" * 32) as store:
        store.set("api_token", token)
        with serve() as server:
            caps = _caps(server.port)
            access = SecretAccess(store, caps.is_secret_allowed)
            result = await http({"url": server.url("/echo")}, _local(server, capabilities=caps, secrets=access))
            assert json.loads(result["body"])["headers"]["Authorization"] == f"Bearer {token}"
            assert token in access.injected  # the leak scanner redacts it from the output

            # A host the mapping does not name gets no credential.
            other = _local(
                server, capabilities=_caps(server.port + 1), secrets=SecretAccess(store, caps.is_secret_allowed)
            )
            plain = await http({"url": server.url("/echo")}, other)
            assert "Authorization" not in json.loads(plain["body"])["headers"]


async def test_a_missing_secret_is_a_clear_error_and_nothing_is_sent(tmp_path: Any) -> None:
    from pincer.secrets.store import SecretAccess, SecretStore

    with SecretStore.open(tmp_path, key=b"k" * 32) as store, serve() as server:
        caps = _caps(server.port)
        with pytest.raises(SecretError, match="api_token"):
            await http(
                {"url": server.url("/echo")},
                _local(server, capabilities=caps, secrets=SecretAccess(store, caps.is_secret_allowed)),
            )
        with pytest.raises(SecretError, match="no access to secrets"):
            await http({"url": server.url("/echo")}, _local(server, capabilities=caps))
        assert server.requests == []


async def test_config_credentials_through_the_whole_call_chain(tmp_path: Any) -> None:
    from pincer.config import parse_config
    from pincer.core.values import CallRequest
    from pincer.service import Pincer

    token = "cfg-token-93c1e07a55d2"
    with serve() as server:
        config = parse_config(
            f"""
[network]
allow_private = true

[[grants]]
tool = "http"
effects = {{ network = "allow", use_secret = "allow" }}
hosts = ["127.0.0.1:{server.port}"]

[[credentials]]
secret = "api_key"
location = "header"
name = "X-Api-Key"
host_patterns = ["127.0.0.1"]
""",
            home=tmp_path,
        )
        async with Pincer.open(tmp_path, config=config, secret_key=b"c" * 32) as pincer:
            pincer.secrets.set("api_key", token)
            result = await pincer.call(CallRequest(tool="http", args={"url": server.url("/echo")}))
    assert result.ok, result.error
    assert server.requests[0].headers["X-Api-Key"] == token  # injected on the way out
    assert token not in json.dumps(result.output) and "REDACTED" in result.output["body"]  # echoed back, redacted
