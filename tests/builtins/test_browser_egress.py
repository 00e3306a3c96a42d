"""The browser's network policy with real Chromium: every request goes through pincer's egress
proxy. The test site on 127.0.0.1:0 is allowed explicitly (``[builtins.browser] base_url``);
another loopback port, a private address in an iframe, a redirect to the metadata address and a
DNS name resolving to loopback (``localhost``, resolved by /etc/hosts: the check is made on the
address the proxy connects to, not on the name) are each blocked and reported. One Pincer (one
Chromium) serves the whole module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pincer.core.values import CallRequest
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture(scope="module")
def other_site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


def browser_config(site: Site, *, grant: str = "", extra: str = "") -> str:
    return f"""
[builtins.browser]
enabled = true
base_url = "{site.origin}"
{extra}

[[grants]]
tool = "browser"
effects = {{ network = "allow", external_write = "allow" }}
{grant}
"""


@pytest.fixture(scope="module")
async def pincer(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[Any]:
    home = tmp_path_factory.mktemp("browser-egress")
    async with pincer_on(home, browser_config(site)) as opened:
        yield opened


async def call(pincer: Any, session: str = "main", **args: Any) -> Any:
    return await pincer.call(CallRequest(session=session, tool="browser", args=args))


async def test_the_allowed_site_loads_and_the_profile_lives_under_pincer_home(pincer: Any, site: Site) -> None:
    url = site.page("/hello", "<title>Hello</title><h1>Hello from the test site</h1>")
    result = await call(pincer, action="navigate", url=url)
    assert result.ok, result.error
    assert result.output["title"] == "Hello" and result.output["status"] == 200
    snap = await call(pincer, action="snapshot")
    assert 'heading "Hello from the test site"' in snap.output["snapshot"]
    launched = pincer.registry.get("browser")  # registered as a built-in
    assert launched is not None
    profiles = list((Path(pincer.config.home) / "browser").iterdir())
    assert profiles and all(p.name.startswith("profile-") for p in profiles)


async def test_an_image_from_another_loopback_port_is_blocked_and_reported(
    pincer: Any, site: Site, other_site: Site
) -> None:
    url = site.page("/img", f'<title>img</title><img src="{other_site.origin}/pixel.png"><p>with image</p>')
    result = await call(pincer, action="navigate", url=url)
    assert result.ok, result.error
    blocked = [b for b in result.output["blocked"] if str(other_site.port) in b["request"]]
    assert [b["request"] for b in blocked] == [f"GET {other_site.origin}/pixel.png"]
    assert "loopback" in blocked[0]["reason"]
    assert other_site.hits == []  # nothing reached the other port
    console = await call(pincer, action="console")
    assert f"{other_site.origin}/pixel.png" in console.output["text"] and "[blocked]" in console.output["text"]


async def test_an_iframe_to_a_private_address_is_blocked(pincer: Any, site: Site) -> None:
    url = site.page("/frame", '<title>frame</title><iframe src="http://10.23.45.67/admin"></iframe>')
    result = await call(pincer, action="navigate", url=url)
    assert result.ok, result.error
    blocked = [b for b in result.output["blocked"] if "10.23.45.67" in b["request"]]
    assert [b["request"] for b in blocked] == ["GET http://10.23.45.67/admin"]
    assert "private" in blocked[0]["reason"]


async def test_a_redirect_to_the_metadata_address_is_blocked(pincer: Any, site: Site) -> None:
    url = site.redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/")
    result = await call(pincer, action="navigate", url=url)
    assert not result.ok
    assert result.error["code"] == "egress_denied"
    assert "metadata" in result.error["message"]


async def test_a_name_that_resolves_to_loopback_is_blocked(pincer: Any, site: Site) -> None:
    """``localhost`` on the allowed site's own port: the name is not the allowed origin, and the
    address it resolves to is loopback."""
    site.page("/by-name", "<title>by name</title>")
    result = await call(pincer, action="navigate", url=f"http://localhost:{site.port}/by-name")
    assert not result.ok
    assert result.error["code"] == "egress_denied" and "loopback" in result.error["message"]
    assert "/by-name" not in site.hits


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "chrome://settings", "view-source:http://127.0.0.1/", "javascript:alert(1)"]
)
async def test_file_chrome_and_view_source_urls_are_refused(pincer: Any, url: str) -> None:
    result = await call(pincer, action="navigate", url=url)
    assert not result.ok and result.error["code"] == "egress_denied"
    assert "only http and https" in result.error["message"]


async def test_a_grant_host_with_a_port_allows_only_that_port(tmp_path: Path, site: Site, other_site: Site) -> None:
    """``hosts = ["127.0.0.1:PORT"]`` with private addresses allowed: the page on that port loads,
    an image from the same address on another port is refused by the grant, and navigating there
    is refused before Chromium is asked."""
    config = f"""
[network]
allow_private = true

[builtins.browser]
enabled = true

[[grants]]
tool = "browser"
effects = {{ network = "allow" }}
hosts = ["127.0.0.1:{site.port}"]
"""
    url = site.page("/ported", f'<title>ported</title><img src="{other_site.origin}/pixel.png">')
    async with pincer_on(tmp_path / "home", config) as opened:
        loaded = await call(opened, action="navigate", url=url)
        assert loaded.ok, loaded.error
        blocked = [b for b in loaded.output["blocked"] if str(other_site.port) in b["request"]]
        assert blocked and "not in the hosts of the grant" in blocked[0]["reason"]
        refused = await call(opened, action="navigate", url=f"{other_site.origin}/pixel.png")
        assert not refused.ok and refused.error["code"] == "egress_denied"
        assert f"127.0.0.1:{other_site.port}" in refused.error["hint"]
    assert other_site.hits == []


async def test_a_file_url_is_refused_before_anyone_is_asked(tmp_path: Path, site: Site) -> None:
    """The scheme check runs in the preflight: an asking grant does not put file:// before a person."""
    config = browser_config(site).replace(
        'effects = { network = "allow", external_write = "allow" }', 'effects = { network = "ask" }'
    )
    asked: list[Any] = []

    async def person(approval: Any) -> None:
        asked.append(approval)

    async with pincer_on(tmp_path / "home", config) as opened:
        request = CallRequest(tool="browser", args={"action": "navigate", "url": "file:///etc/passwd"})
        result = await opened.call(request, on_approval=person)
    assert not result.ok and result.error["code"] == "egress_denied" and asked == []
