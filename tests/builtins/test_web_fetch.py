"""web_fetch through the call chain: saved pages (a news article, a documentation page, pages in
windows-1251 and Shift_JIS) to Markdown without navigation and footers, and the SSRF rule: no
loopback, private, link-local or metadata address, also via DNS and after a redirect."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pincer.builtins.web_fetch import decode_page
from pincer.core.values import CallRequest
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

PAGES = Path(__file__).parent / "pages"
# file -> the Content-Type it is served with (the windows-1251 page declares its charset only in <meta>)
SERVED = {
    "news-article.html": "text/html; charset=utf-8",
    "docs-page.html": "text/html",
    "cp1251-news.html": "text/html",
    "shift_jis-news.html": "text/html; charset=Shift_JIS",
}
SERVER_STOP_TIMEOUT_S = 5.0


@dataclass
class PageServer:
    server: ThreadingHTTPServer
    paths: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serve_pages() -> Iterator[PageServer]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            state.paths.append(self.path)
            name = url.path.lstrip("/")
            if url.path == "/redirect":
                self._send(302, b"", "text/plain", {"Location": parse_qs(url.query)["to"][0]})
            elif name in SERVED:
                self._send(200, (PAGES / name).read_bytes(), SERVED[name])
            elif name == "image.png":
                self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
            else:
                self._send(404, b"missing", "text/plain")

        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = PageServer(server=server)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(SERVER_STOP_TIMEOUT_S)


def _config(base: str | None = None) -> str:
    base_line = f'base_url = "{base}"' if base else ""
    return f"""
[builtins.web_fetch]
enabled = true
{base_line}

[[grants]]
tool = "web_fetch"
effects = {{ network = "allow" }}
"""


async def _fetch(tmp_path: Path, url: str, base: str | None = None, **extra: Any) -> Any:
    async with pincer_on(tmp_path, _config(base)) as pincer:
        return await pincer.call(CallRequest(tool="web_fetch", args={"url": url, **extra}))


@pytest.mark.parametrize(
    ("page", "kept", "dropped"),
    [
        ("news-article.html", ["# City council approves riverside bike lanes", "## Shop owners remain divided",
                               "- Utility works start in the summer", "61 percent"],
         ["Subscribe today", "Accept all cookies", "All rights reserved", "Privacy policy", "Sunny Holidays",
          "morning briefing"]),
        ("docs-page.html", ["# Connection pools", "| `max_connections` | 10 |", "from wavelet import Pool",
                            "await pool.aclose()"],
         ["Search docs", "Changelog", "Built with Sphinx", "« Previous"]),
        ("cp1251-news.html", ["# Весенний ледоход на Волге начался раньше обычного", "## Что советуют спасатели",
                              "гидрометцентра"], ["Главная", "Все права защищены"]),
        ("shift_jis-news.html", ["# 東京の桜、平年より五日早く満開に", "靖国神社の標本木"], ["ログイン", "無断転載"]),
    ],
)
async def test_saved_pages_become_readable_markdown(tmp_path: Path, page: str, kept: list[str], dropped: list[str]) -> None:
    with serve_pages() as pages:
        result = await _fetch(tmp_path, f"{pages.origin}/{page}", base=pages.origin)
    assert result.ok, result.error
    markdown = result.output["markdown"]
    for text in kept:
        assert text in markdown, (text, markdown)
    for text in dropped:
        assert text not in markdown, (text, markdown)
    assert result.output["title"]


def test_charset_order_header_then_meta_then_detection() -> None:
    body = (PAGES / "cp1251-news.html").read_bytes()
    assert decode_page(body, "text/html")[1] == "windows-1251"  # from <meta>
    text, charset = decode_page("привет мир, это проверка кодировки".encode("koi8-r") * 20, "text/html; charset=koi8-r")
    assert charset == "koi8-r" and "привет" in text
    guessed, _ = decode_page(("Съешь же ещё этих мягких французских булок, да выпей чаю. " * 20).encode("cp1251"), "text/html")
    assert "французских" in guessed


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:{port}/news-article.html", "loopback"),
        ("http://localhost:{port}/news-article.html", "resolved from 'localhost'"),
        ("https://10.1.2.3/", "private"),
        ("https://169.254.10.1/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://[::ffff:127.0.0.1]:{port}/", "loopback"),
        ("file:///etc/passwd", "http(s)"),
    ],
)
async def test_internal_targets_are_refused(tmp_path: Path, url: str, words: str) -> None:
    with serve_pages() as pages:
        port = pages.server.server_address[1]
        result = await _fetch(tmp_path, url.format(port=port))
        assert pages.paths == []  # nothing reached the server
    assert not result.ok
    assert words in result.error["message"], result.error


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{other}/news-article.html",  # loopback, another port: not the configured origin
        "http://localhost:{port}/news-article.html",  # the same port under a name resolving to 127.0.0.1
        "https://10.0.0.7/",
        "http://169.254.169.254/latest/meta-data/iam/",
    ],
)
async def test_each_redirect_is_checked_again(tmp_path: Path, target: str) -> None:
    """The configured base_url lets web_fetch reach exactly that origin; a redirect from it to any
    other internal address is refused like a first request would be."""
    with serve_pages() as pages, serve_pages() as other:
        port, other_port = pages.server.server_address[1], other.server.server_address[1]
        to = target.format(port=port, other=other_port)
        result = await _fetch(tmp_path, f"{pages.origin}/redirect?to={to}", base=pages.origin)
        assert other.paths == []
        assert pages.paths == [f"/redirect?to={to}"]
    assert not result.ok and result.error["code"] == "egress_denied", result.error


async def test_a_redirect_inside_the_allowed_origin_is_followed(tmp_path: Path) -> None:
    with serve_pages() as pages:
        result = await _fetch(tmp_path, f"{pages.origin}/redirect?to=/docs-page.html", base=pages.origin)
    assert result.ok, result.error
    assert result.output["url"].endswith("/docs-page.html") and result.output["redirects"]
    assert "# Connection pools" in result.output["markdown"]


async def test_limits_and_content_types(tmp_path: Path) -> None:
    with serve_pages() as pages:
        short = await _fetch(tmp_path, f"{pages.origin}/news-article.html", base=pages.origin, max_chars=200)
        image = await _fetch(tmp_path, f"{pages.origin}/image.png", base=pages.origin)
        missing = await _fetch(tmp_path, f"{pages.origin}/nope.html", base=pages.origin)
    assert short.ok and short.output["truncated"] and len(short.output["markdown"]) < 300
    assert not image.ok and "image/png" in image.error["message"]
    assert not missing.ok and "404" in missing.error["message"]


async def test_the_output_is_untrusted(tmp_path: Path) -> None:
    async with pincer_on(tmp_path, _config()) as pincer:
        spec = pincer.registry.get("web_fetch")
    assert spec is not None and spec.output_trusted is False


async def test_a_grants_hosts_narrow_what_it_may_fetch(tmp_path: Path) -> None:
    config = _config().replace('effects = { network = "allow" }', 'effects = { network = "allow" }\nhosts = ["docs.example.org"]')
    async with pincer_on(tmp_path, config) as pincer:
        result = await pincer.call(CallRequest(tool="web_fetch", args={"url": "https://news.example.com/a"}))
    assert not result.ok and "the grant allows only docs.example.org" in result.error["message"]
