"""Egress: URL checks, allowlist, SSRF rule, and send() against real local servers."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import httpcore2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import EgressDenied, ToolError, ToolTimeout, UsageError
from pincer.safety.addresses import address_refusal
from pincer.safety.egress import (
    EgressClient,
    EgressPolicy,
    EgressRule,
    HttpRequest,
    check_url,
    send,
)
from pincer.safety.egress_transport import MAX_HEADERS
from pincer.safety.resolution import checked_addresses
from tests.localservers import make_ca, serve

pytestmark = pytest.mark.anyio

SHORT_TIMEOUT_S = 0.3  # a request to /slow must give up after this; the server waits far longer

# ------------------------------------------------------------------------------------- check_url


@pytest.mark.parametrize(
    ("url", "host", "port", "target"),
    [
        ("https://Example.COM/a/b", "example.com", 443, "/a/b"),
        ("https://example.com", "example.com", 443, "/"),
        ("https://example.com.:8443/x?q=1#frag", "example.com", 8443, "/x?q=1"),
        ("https://example.com/a/./b/../c", "example.com", 443, "/a/c"),
        ("https://example.com//a///b/", "example.com", 443, "/a/b/"),
        ("https://example.com/a/b/..", "example.com", 443, "/a/"),
        ("https://bücher.de/ä%20b?x=ü", "xn--bcher-kva.de", 443, "/%C3%A4%20b?x=%C3%BC"),
        ("https://93.184.216.34/", "93.184.216.34", 443, "/"),
        ("https://[2606:4700::1111]:444/", "2606:4700::1111", 444, "/"),
        ("https://example.com/v1/%41bc", "example.com", 443, "/v1/%41bc"),
    ],
)
def test_check_url_normalises(url: str, host: str, port: int, target: str) -> None:
    checked = check_url(url)
    assert (checked.host, checked.port, checked.target) == (host, port, target)
    assert check_url(checked.url) == checked  # the canonical form is a fixed point


def test_check_url_decoded_path_is_matched_form() -> None:
    checked = check_url("https://example.com/v1/%41bc/d%20e")
    assert checked.decoded_path == "/v1/Abc/d e"
    assert checked.display == "https://example.com/v1/%41bc/d%20e"


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("https://api.example.com@evil.com/", "userinfo"),
        ("https://user:pw@example.com/", "userinfo"),
        ("https://example.com/a%2fb", "%2f"),
        ("https://example.com/a%2Fb", "%2f"),
        ("https://example.com/a%5cb", "%5c"),
        ("https://example.com/v1/%2e%2e/admin", "%2e%2e"),
        ("https://example.com/v1/.%2e/admin", "%2e%2e"),
        ("https://example.com/v1/%2E/admin", "%2e%2e"),
        ("https://example.com/a%252fb", "double-encoded"),
        ("https://example.com/a%00b", "NUL"),
        ("https://example.com/a%zz", "percent-encoding"),
        ("https://example.com/%ff", "UTF-8"),
        ("https://example.com\\@evil.com/", "backslash"),
        ("https://exa mple.com/", "whitespace"),
        ("https://example.com/\r\nX: y", "control"),
        ("https://example.com/../etc", "above the root"),
        ("https://example.com:0/", "port"),
        ("https://example.com:65536/", "port"),
        ("https://example.com:+80/", "port"),
        ("https://example.com:/", "port"),
        ("https://[fe80::1%25eth0]/", "zone"),
        ("https://[::1/", "closing"),
        ("https://::1/", "brackets"),
        ("https://2130706433/", "numeric"),
        ("https://0x7f.0.0.1/", "numeric"),
        ("https://0177.0.0.1/", "numeric"),
        ("https://127.1/", "numeric"),
        ("https://1.2.3.4.5/", "numeric"),
        ("https://exa%6dple.com/", "percent-encoding in the host"),
        ("https:///path", "no host"),
        ("https:example.com", "'//'"),
        ("example.com/path", "no scheme"),
        ("ftp://example.com/", "https only"),
        ("http://example.com/", "https only"),
        ("javascript:alert(1)", "https only"),
        ("https://-a-.com/", "invalid label"),
        ("", "empty"),
    ],
)
def test_check_url_refuses(url: str, rule: str) -> None:
    with pytest.raises(EgressDenied) as info:
        check_url(url)
    assert rule.lower() in str(info.value).lower()
    assert info.value.hint


def test_check_url_refuses_non_strings_and_long_urls() -> None:
    with pytest.raises(EgressDenied, match="string"):
        check_url(b"https://example.com/")
    with pytest.raises(EgressDenied, match="limit"):
        check_url("https://example.com/" + "a" * 9000)


def test_plain_http_only_with_the_setting() -> None:
    assert check_url("http://127.0.0.1:8080/x", allow_plain_http=True).scheme == "http"
    for trick in ("http://2130706433/", "http://017700000001/", "http://0x7f.1/", "http://127.000.000.001/"):
        with pytest.raises(EgressDenied, match="numeric"):
            check_url(trick, allow_plain_http=True)


@given(st.text(max_size=300))
@settings(max_examples=400, deadline=None)
def test_check_url_never_crashes_on_text(text: str) -> None:
    try:
        check_url(text, allow_plain_http=True)
    except EgressDenied:
        pass


_url_chars = st.sampled_from(list("abcAB09-._~%2fFeE5cC/\\?#@:[]!$&'()*+,;= \t") + ["..", "%2e", "%2F", "ü", "\x00"])


@given(
    scheme=st.sampled_from(["https", "http", "HTTPS", "ftp", ""]),
    host=st.one_of(
        st.sampled_from(["example.com", "127.0.0.1", "[::1]", "2130706433", "a@b", "xn--bcher-kva.de", "EXAMPLE.com."]),
        st.lists(_url_chars, max_size=12).map("".join),
    ),
    port=st.one_of(st.none(), st.integers(min_value=-5, max_value=70000).map(str), st.text(max_size=4)),
    path=st.lists(_url_chars, max_size=20).map("".join),
)
@settings(max_examples=600, deadline=None)
def test_check_url_properties(scheme: str, host: str, port: str | None, path: str) -> None:
    url = f"{scheme}://{host}{':' + port if port is not None else ''}/{path}"
    try:
        checked = check_url(url, allow_plain_http=True)
    except EgressDenied:
        return
    segments = checked.path.split("/")
    assert checked.path.startswith("/")
    assert "." not in segments and ".." not in segments
    assert "" not in segments[1:-1]  # no empty segments except the leading and a trailing one
    assert "@" not in checked.host and "%" not in checked.host
    assert 0 < checked.port < 65536
    assert check_url(checked.url, allow_plain_http=True) == checked


# ------------------------------------------------------------------------------------ addresses


@pytest.mark.parametrize(
    ("address", "reason", "always"),
    [
        ("127.0.0.1", "loopback", False),
        ("::1", "loopback", False),
        ("10.1.2.3", "private", False),
        ("172.16.0.1", "private", False),
        ("192.168.1.1", "private", False),
        ("fd12::1", "private", False),
        ("169.254.1.1", "link-local", False),
        ("fe80::1", "link-local", False),
        ("100.64.0.1", "CGNAT", False),
        ("::ffff:127.0.0.1", "loopback", False),
        ("::ffff:10.0.0.1", "private", False),
        ("2002:7f00:1::", "loopback", False),
        ("64:ff9b::a00:1", "private", False),
        ("169.254.169.254", "metadata", True),
        ("::ffff:169.254.169.254", "metadata", True),
        ("fd00:ec2::254", "metadata", True),
        ("0.0.0.0", "unspecified", True),
        ("::", "unspecified", True),
        ("224.0.0.1", "multicast", True),
        ("ff02::1", "multicast", True),
        ("240.0.0.1", "reserved", True),
        ("255.255.255.255", "reserved", True),
    ],
)
def test_address_refusals(address: str, reason: str, always: bool) -> None:
    ip = ipaddress.ip_address(address)
    refusal = address_refusal(ip)
    assert refusal is not None and reason in refusal.reason and refusal.always is always
    relaxed = address_refusal(ip, allow_private_network=True)
    assert (relaxed is not None) is always


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


# ------------------------------------------------------------------------------------ allowlist


def test_rule_matching() -> None:
    policy = EgressPolicy(
        rules=(
            EgressRule(host="api.example.com", path_prefix="/v1/"),
            EgressRule(host="*.svc.example.com", methods=frozenset({"get"})),
            EgressRule(host="pinned.example.com:8443"),
        )
    )
    assert policy.check("POST", "https://API.example.com/v1/chat").host == "api.example.com"
    assert policy.check("get", "https://a.b.svc.example.com/x").port == 443
    assert policy.check("GET", "https://pinned.example.com:8443/").port == 8443
    cases = [
        ("GET", "https://evil.com/v1/", "not in the allowlist"),
        ("GET", "https://api.example.com.evil.com/v1/", "not in the allowlist"),
        ("GET", "https://svc.example.com/", "not in the allowlist"),  # wildcard never matches the apex
        ("GET", "https://api.example.com/v2/x", "outside the allowed prefixes"),
        ("GET", "https://api.example.com/v1/../admin", "outside the allowed prefixes"),
        ("GET", "https://api.example.com/v1", "outside the allowed prefixes"),
        ("POST", "https://a.svc.example.com/", "method POST is not allowed"),
        ("GET", "https://pinned.example.com/", "not in the allowlist"),
        ("CONNECT", "https://api.example.com/v1/", "refused"),
        ("TRACE", "https://api.example.com/v1/", "refused"),
        ("G ET", "https://api.example.com/v1/", "not a valid method"),
    ]
    for method, url, message in cases:
        with pytest.raises(EgressDenied, match=message):
            policy.check(method, url)


def test_empty_allowlist_says_what_to_do() -> None:
    with pytest.raises(EgressDenied, match="empty allowlist") as info:
        EgressPolicy(rules=()).check("GET", "https://example.com/")
    assert "example.com" in (info.value.hint or "")


@pytest.mark.parametrize(
    "pattern", ["*", "a*.example.com", "*.*.com", "example.com:99999", "example.com:x", "", "ex ample.com"]
)
def test_bad_host_patterns(pattern: str) -> None:
    with pytest.raises(UsageError):
        EgressRule(host=pattern)


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_host_patterns_never_crash(pattern: str) -> None:
    try:
        EgressRule(host=pattern)
    except UsageError:
        pass


def test_from_http_capability_reads_an_ironclaw_manifest(corpus: Path) -> None:
    from pincer.core.capabilities import Capabilities

    caps = Capabilities.from_path(corpus / "ironclaw-v0.29.1/channels-src/telegram/telegram.capabilities.json")
    policy = EgressPolicy.from_http_capability(caps.http)
    assert policy.max_response_bytes == 52_428_800
    assert policy.check("POST", "https://api.telegram.org/bot123:abc/sendMessage").host == "api.telegram.org"
    with pytest.raises(EgressDenied, match="outside the allowed prefixes"):
        policy.check("GET", "https://api.telegram.org/admin")


# ----------------------------------------------------------------------------------------- send


def _local_policy(server_port: int, **settings: object) -> EgressPolicy:
    base: dict[str, object] = {"allow_private_network": True, "allow_plain_http_loopback": True}
    base.update(settings)
    return EgressPolicy.from_hosts([f"127.0.0.1:{server_port}", f"localhost:{server_port}"], **base)


async def test_send_to_a_local_server() -> None:
    with serve() as server:
        response = await send(
            HttpRequest(
                method="POST",
                url=server.url("/echo/./a/../b?x=1"),
                headers=(("X-Test", "yes"),),
                body=b'{"k": 1}',
            ),
            policy=_local_policy(server.port),
        )
    assert response.status == 200
    (seen,) = server.requests
    assert seen.path == "/echo/b?x=1"  # the normalised path is what went out
    assert seen.headers["Host"] == f"127.0.0.1:{server.port}"
    assert seen.headers["X-Test"] == "yes" and seen.headers["Accept-Encoding"] == "identity"
    assert seen.body == b'{"k": 1}'
    assert response.header("content-type") == "application/json"


async def test_loopback_refused_without_the_setting() -> None:
    with serve() as server:
        for url in (server.url("/echo"), f"http://localhost:{server.port}/echo"):
            with pytest.raises(EgressDenied, match="loopback") as info:
                await send(
                    HttpRequest(method="GET", url=url),
                    policy=_local_policy(server.port, allow_private_network=False),
                )
            assert "[network] allow_private = true" in (info.value.hint or "")
    assert server.requests == []


async def test_plain_http_refused_to_non_loopback_even_with_the_setting() -> None:
    policy = EgressPolicy.from_hosts(["10.0.0.1"], allow_private_network=True, allow_plain_http_loopback=True)
    with pytest.raises(EgressDenied, match="only to loopback"):
        await send(HttpRequest(method="GET", url="http://10.0.0.1/"), policy=policy)


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.7/",
        "https://[::ffff:169.254.169.254]/",
        "https://[::1]/",
    ],
)
async def test_internal_addresses_refused_before_connecting(url: str) -> None:
    host = check_url(url).authority
    with pytest.raises(EgressDenied, match="no private network"):
        await send(HttpRequest(method="GET", url=url), policy=EgressPolicy.from_hosts([host]))


async def test_metadata_refused_even_with_private_network_allowed() -> None:
    policy = EgressPolicy.from_hosts(["169.254.169.254"], allow_private_network=True)
    with pytest.raises(EgressDenied, match="metadata") as info:
        await send(HttpRequest(method="GET", url="https://169.254.169.254/"), policy=policy)
    assert "never" in (info.value.hint or "")


async def test_redirect_is_returned_not_followed() -> None:
    with serve() as target, serve() as origin:
        policy = EgressPolicy.from_hosts(
            [f"127.0.0.1:{origin.port}", f"127.0.0.1:{target.port}"],
            allow_private_network=True,
            allow_plain_http_loopback=True,
        )
        response = await send(
            HttpRequest(method="GET", url=origin.url(f"/redirect?to={target.url('/echo')}")), policy=policy
        )
    assert response.status == 302
    assert response.header("location") == target.url("/echo")
    assert target.requests == []


async def test_response_truncated_at_the_limit() -> None:
    with serve() as server:
        response = await send(
            HttpRequest(method="GET", url=server.url("/bytes?n=200000")),
            policy=_local_policy(server.port, max_response_bytes=1000),
        )
    assert response.truncated and response.body == b"a" * 1000


async def test_request_size_limit() -> None:
    with serve() as server, pytest.raises(EgressDenied, match="max_request_bytes"):
        await send(
            HttpRequest(method="POST", url=server.url("/echo"), body=b"x" * 5000),
            policy=_local_policy(server.port, max_request_bytes=4096),
        )
    assert server.requests == []


async def test_timeout_bounds_the_whole_exchange() -> None:
    with serve() as server, pytest.raises(ToolTimeout, match="longer than|timed out"):
        await send(
            HttpRequest(method="GET", url=server.url("/slow")),
            policy=_local_policy(server.port, timeout_s=SHORT_TIMEOUT_S),
        )


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ((("Host", "evil.com"),), "reserved headers"),
        ((("Transfer-Encoding", "chunked"),), "reserved headers"),
        ((("Content-Length", "0"),), "reserved headers"),
        ((("X-A", "a\r\nX-Injected: 1"),), "header injection"),
        ((("Bad Name", "v"),), "not a valid token"),
    ],
)
async def test_header_rules(headers: tuple[tuple[str, str], ...], message: str) -> None:
    with serve() as server:
        with pytest.raises(EgressDenied, match=message):
            await send(
                HttpRequest(method="GET", url=server.url("/echo"), headers=headers), policy=_local_policy(server.port)
            )
    assert server.requests == []


async def test_connection_refused_is_a_tool_error() -> None:
    with serve() as server:
        port = server.port
    with pytest.raises(ToolError, match="could not connect"):
        await send(HttpRequest(method="GET", url=f"http://127.0.0.1:{port}/"), policy=_local_policy(port))


async def test_unresolvable_host_is_a_tool_error() -> None:
    policy = EgressPolicy.from_hosts(["no-such-host.invalid"])
    with pytest.raises(ToolError, match="could not resolve"):
        await send(HttpRequest(method="GET", url="https://no-such-host.invalid/"), policy=policy)


async def test_pool_refuses_connections_send_did_not_check() -> None:
    with serve() as server:
        async with EgressClient() as client:
            with pytest.raises(EgressDenied, match="not checked"):
                await client._pool.request("GET", server.url("/echo"))
    assert server.requests == []


async def test_one_client_one_network_setting() -> None:
    with serve() as server:
        async with EgressClient() as client:
            first = await send(
                HttpRequest(method="GET", url=server.url("/echo")), policy=_local_policy(server.port), client=client
            )
            again = await send(
                HttpRequest(method="GET", url=server.url("/echo")), policy=_local_policy(server.port), client=client
            )
            with pytest.raises(UsageError, match="one EgressClient per egress policy"):
                await send(
                    HttpRequest(method="GET", url="https://example.com/"),
                    policy=EgressPolicy.from_hosts(["example.com"]),
                    client=client,
                )
    assert first.status == again.status == 200


async def test_tls_to_a_pinned_address_verifies_the_host_name(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, ("localhost",))
    with serve(tls=ca.server_context()) as server:
        policy = EgressPolicy.from_hosts([f"localhost:{server.port}"], allow_private_network=True)
        async with EgressClient(ssl_context=ca.client_context()) as client:
            response = await send(
                HttpRequest(method="GET", url=server.url("/echo", host="localhost")), policy=policy, client=client
            )
    assert response.status == 200
    assert server.requests[0].headers["Host"] == f"localhost:{server.port}"


async def test_tls_with_a_certificate_for_another_name_fails(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, ("other.test",))
    with serve(tls=ca.server_context()) as server:
        policy = EgressPolicy.from_hosts([f"localhost:{server.port}"], allow_private_network=True)
        async with EgressClient(ssl_context=ca.client_context()) as client:
            with pytest.raises(ToolError, match="TLS"):
                await send(
                    HttpRequest(method="GET", url=server.url("/", host="localhost")), policy=policy, client=client
                )
    assert server.requests == []


def test_httpcore2_is_the_transport() -> None:
    # The pinned backend depends on httpcore2 (httpx2's own, so no second HTTP core in the core
    # install) opening connections in the requesting task, as its 2.x pools do.
    assert httpcore2.__version__.startswith("2.")


# ------------------------------------------------------------------- more addresses, rules and URLs


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("fec0::1", "a site-local address"),
        # Teredo: an internal client (10.0.0.1, stored inverted) or server behind a public one.
        ("2001:0:808:808:0:0:f5ff:fffe", "a private address (embedded in an IPv6 address)"),
        ("2001:0:a00:1:0:0:f7f7:f7f7", "a private address (embedded in an IPv6 address)"),
        ("2002:a00:1::1", "a private address (embedded in an IPv6 address)"),
    ],
)
def test_more_ipv6_forms_of_internal_addresses_are_refused(address: str, reason: str) -> None:
    refusal = address_refusal(ipaddress.ip_address(address))
    assert refusal is not None and refusal.reason == reason and not refusal.always


def test_a_public_address_embedded_by_6to4_passes() -> None:
    """6to4 embedding a public address is judged as the IPv6 address it is, which is global."""
    assert address_refusal(ipaddress.ip_address("2002:808:808::1")) is None


@pytest.mark.parametrize("prefix", ["v1/", "", "api"])
def test_a_path_prefix_must_start_with_a_slash(prefix: str) -> None:
    with pytest.raises(UsageError, match="must start with '/'") as info:
        EgressRule(host="api.example.com", path_prefix=prefix)
    assert info.value.hint == "use '/' to allow every path"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.com/?q=%zz", "the query has a '%' not followed by two hex digits"),
        ("https://example.com/?q=100%", "the query has a '%' not followed by two hex digits"),
        ("https://[::1]x/", "unexpected characters after the IPv6 address"),
        ("https://[::1/", "has no closing ']'"),
    ],
)
def test_malformed_urls_are_refused_saying_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(EgressDenied, match=re.escape(message)):
        check_url(url)


async def test_a_name_that_cannot_be_resolved_is_a_tool_error_naming_it() -> None:
    """A label over 63 characters fails in the IDNA codec before any DNS query is sent."""
    host = "a" * 64 + ".example"
    with pytest.raises(ToolError, match="could not resolve") as info:
        await checked_addresses(host, 443, allow_private_network=False)
    assert host in info.value.message and info.value.hint == "check the host name"


async def test_a_tools_own_user_agent_and_accept_encoding_are_sent_as_given() -> None:
    with serve() as server:
        await send(
            HttpRequest(
                method="GET",
                url=server.url("/echo"),
                headers=(("User-Agent", "my-tool/2"), ("Accept-Encoding", "gzip")),
            ),
            policy=_local_policy(server.port),
        )
    (seen,) = server.requests
    assert seen.headers["User-Agent"] == "my-tool/2" and seen.headers["Accept-Encoding"] == "gzip"


async def test_too_many_request_headers_are_refused_before_anything_is_sent() -> None:
    with serve() as server:
        headers = tuple((f"X-H{i}", "v") for i in range(MAX_HEADERS + 1))
        with pytest.raises(EgressDenied, match=f"{MAX_HEADERS + 1} request headers; the limit is {MAX_HEADERS}"):
            await send(HttpRequest(method="GET", url=server.url("/echo"), headers=headers), policy=_local_policy(server.port))
    assert server.requests == []
