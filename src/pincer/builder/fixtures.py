"""A local HTTP server that answers a build's tests with the model's fixtures.

During the test stage every request a tool makes passes the real checks (allowlist, leak scan,
credential injection) and is then sent here instead of its host (see ``HttpGateway(redirect=)``):
``https://api.example.com/v1/x?q=1`` arrives as ``/https/api.example.com/v1/x?q=1``. A fixture
answers by method and URL (the query must match when the fixture has one); anything else is a
404 naming the request. Every request is recorded (with its headers, so a test can see where the
host injected a credential).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pincer.builder.code import Fixture
from pincer.safety.egress import HttpRequest

__all__ = ["FixtureServer", "Received", "STOP_TIMEOUT_S"]

STOP_TIMEOUT_S = 5.0
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class Received:
    method: str
    url: str
    headers: dict[str, str]


class FixtureServer:
    def __init__(self, fixtures: Sequence[Fixture]) -> None:
        self.fixtures = list(fixtures)
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FixtureServer:
        handler = type("Handler", (_Handler,), {"fixture_server": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="pincer-build-fixtures", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def redirect(self, request: HttpRequest) -> HttpRequest:
        """The checked request, sent here instead of its host."""
        parts = urlsplit(request.url)
        target = f"http://127.0.0.1:{self.port}/{parts.scheme}/{parts.netloc}{parts.path or '/'}"
        if parts.query:
            target += f"?{parts.query}"
        return HttpRequest(method=request.method, url=target, headers=request.headers, body=request.body)

    def answer(self, method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
        with self._lock:
            self.received.append(Received(method=method, url=url, headers=headers))
        wanted = urlsplit(url)
        for fixture in self.fixtures:
            have = urlsplit(fixture.url)
            if fixture.method != method or (have.scheme, have.netloc.lower(), have.path or "/") != (
                wanted.scheme, wanted.netloc.lower(), wanted.path or "/"
            ):  # fmt: skip
                continue
            if have.query and have.query != wanted.query:
                continue
            body = fixture.body
            if isinstance(body, str):
                return fixture.status, body.encode("utf-8"), "text/plain; charset=utf-8"
            return fixture.status, json.dumps(body).encode("utf-8"), "application/json"
        return 404, f"no fixture answers {method} {url}".encode(), "text/plain; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    fixture_server: FixtureServer

    def log_message(self, *args: Any) -> None:
        pass

    def _any(self) -> None:
        length = min(int(self.headers.get("content-length") or 0), MAX_BODY_BYTES)
        if length:
            self.rfile.read(length)
        scheme, _, rest = self.path.lstrip("/").partition("/")
        url = f"{scheme}://{rest}"
        status, body, ctype = self.fixture_server.answer(self.command, url, {k.lower(): v for k, v in self.headers.items()})
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _any
