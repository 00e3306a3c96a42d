"""Issue 38: what the browser tool tells a person about refused requests, with real Chromium.

- A loopback page outside the grant: the hint names everything that opens it at once
  ([network] allow_private and the grant's hosts); following it, the page opens.
- Chromium's own background traffic through a session's proxy is not reported as "blocked"
  (only the requests of the session's pages are).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pincer.builtins.browser.host import BrowserHost
from pincer.builtins.browser.tool import _blocked
from pincer.safety.egress_proxy import ProxyPolicy
from tests.builtins.browser_pages import serve_site

PINCER_BIN = Path(sys.executable).with_name("pincer")
CLI_TIMEOUT_S = 180  # Chromium starts in the subprocess


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env.update({"PINCER_HOME": str(home), "HOME": str(home.parent / "user-home"), "COLUMNS": "300"})
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


_GRANT = """
[builtins.browser]
enabled = true

[[grants]]
tool = "browser"
effects = {{ network = "allow", external_write = "allow" }}
hosts = [{hosts}]
"""


def test_a_loopback_page_outside_the_grant_names_allow_private_and_the_grant_at_once(tmp_path: Path) -> None:
    """Before: the hint said only "add 127.0.0.1:PORT (or 127.0.0.1) to the browser grant's
    hosts"; done, the next call was refused again (a loopback address needs [network] allow_private)."""
    home = tmp_path / "home"
    home.mkdir()
    with serve_site() as site:
        url = site.page("/hello.html", "<title>hello</title><p>hi</p>")
        (home / "config.toml").write_text(_GRANT.format(hosts='"example.org"'))
        refused = _pincer(home, "tools", "call", "browser", "--args", json.dumps({"action": "open", "url": url}), "--json")
        error = json.loads(refused.stdout)["error"]
        assert error["code"] == "egress_denied", error
        assert error["hint"] == (
            "set [network] allow_private = true in config.toml (127.0.0.1 is a loopback or private address) and put "
            f"127.0.0.1:{site.port} (or 127.0.0.1) in the browser grant's hosts"
        )
        # Doing what it says opens the page: no second refusal.
        (home / "config.toml").write_text(
            "[network]\nallow_private = true\n" + _GRANT.format(hosts=f'"example.org", "127.0.0.1:{site.port}"')
        )
        opened = _pincer(home, "tools", "call", "browser", "--args", json.dumps({"action": "open", "url": url}), "--json")
    output = json.loads(opened.stdout)
    assert output["ok"] is True and output["output"]["title"] == "hello" and "blocked" not in output["output"], output


@pytest.mark.anyio
async def test_chromiums_own_requests_through_the_proxy_are_not_reported_as_blocked(tmp_path: Path) -> None:
    """Before: every refusal of the session's proxy was listed under "blocked" and written to the
    console as [blocked], Chromium's own background requests (component updates, safe browsing)
    among them, as if the page had made them."""
    host = BrowserHost(profile_root=tmp_path / "profiles")
    try:
        with serve_site() as site, serve_site() as other:
            page_url = site.page("/page.html", f'<img src="{other.origin}/pixel.png"><p>page</p>')
            policy = ProxyPolicy(grant_hosts=(f"127.0.0.1:{site.port}",), allow_private=True)
            browser = await host.session("main", policy, None)
            page = await browser.context.new_page()
            browser.add_page(page)
            mark = browser.proxy.mark
            await page.goto(page_url, wait_until="load")
            # What Chromium's network service does on its own: a CONNECT no page asked for.
            proxy_host, _, proxy_port = browser.proxy.url.removeprefix("http://").rpartition(":")
            reader, writer = await asyncio.open_connection(proxy_host, int(proxy_port))
            writer.write(b"CONNECT update.googleapis.com:443 HTTP/1.1\r\nHost: update.googleapis.com:443\r\n\r\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.readline(), 30)
            writer.close()
            assert b" 403 " in answer, answer  # the proxy refused it, as it should
            assert any(r.target == "update.googleapis.com:443" for r in browser.proxy.refusals_since(mark))
            blocked = _blocked(browser, mark)
            console = [entry["text"] for entry in browser.console if entry["type"] == "blocked"]
    finally:
        await host.aclose()
    assert [b["request"] for b in blocked] == [f"GET {other.origin}/pixel.png"], blocked
    assert not [text for text in console if "googleapis" in text], console
