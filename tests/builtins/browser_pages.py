"""Pages the browser tests serve on 127.0.0.1:0: a real HTTP server in a thread, routes by path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cf"
    "c0f01f0005000201ab8f9c5a0000000049454e44ae426082"
)


@dataclass
class Site:
    """Routes path -> (status, headers, body); ``hits`` the paths asked for, ``posts`` form bodies."""

    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    posts: list[dict[str, list[str]]] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)
    # path -> headers of an endless body: chunks are written until the client hangs up, and
    # ``streamed[path]`` counts the bytes that got out (a download that never ends, or lies about
    # its length, is how a page would fill the disk).
    endless: dict[str, dict[str, str]] = field(default_factory=dict)
    streamed: dict[str, int] = field(default_factory=dict)
    hung_up: set[str] = field(default_factory=set)
    port: int = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def page(self, path: str, html: str, *, headers: dict[str, str] | None = None) -> str:
        self.routes[path] = (200, {"Content-Type": "text/html; charset=utf-8", **(headers or {})}, html.encode())
        return self.origin + path

    def redirect(self, path: str, location: str) -> str:
        self.routes[path] = (302, {"Location": location}, b"")
        return self.origin + path


@contextmanager
def serve_site() -> Iterator[Site]:
    site = Site()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            path = urlsplit(self.path).path
            site.hits.append(path)
            site.cookies.append(self.headers.get("Cookie", ""))
            if path in site.endless:
                self._stream_forever(path)
                return
            if path == "/pixel.png":
                status, headers, body = 200, {"Content-Type": "image/png"}, PNG_1PX
            else:
                status, headers, body = site.routes.get(path, (404, {"Content-Type": "text/plain"}, b"not found"))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _stream_forever(self, path: str) -> None:
            self.send_response(200)
            for key, value in site.endless[path].items():
                self.send_header(key, value)
            self.end_headers()  # no length: the body ends when the connection does
            chunk = b"x" * 65536
            try:
                while True:
                    self.wfile.write(chunk)
                    site.streamed[path] = site.streamed.get(path, 0) + len(chunk)
            except OSError:
                site.hung_up.add(path)
            self.close_connection = True

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            kind = self.headers.get("Content-Type", "")
            if kind.startswith("application/x-www-form-urlencoded"):
                site.posts.append(parse_qs(raw.decode()))
            else:
                site.posts.append({"_raw": [raw.decode("latin-1")], "_type": [kind]})
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
