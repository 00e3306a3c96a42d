"""Builder tests: the shared runner built once per run (cached like the WASM test components),
a secret store, a local "real host" and the scripted model server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.runtimes.wasm.conftest import cache_root

KEY = b"k" * 32


@pytest.fixture(scope="session")
def runner_cache() -> Path:
    """The runner component and its compiled form, built on first use and kept between runs."""
    from pincer.builder.runner import ensure_runner

    directory = cache_root() / "runner"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ensure_runner(directory, directory.parent / "runner-home")
    return directory


class ApiServer:
    """A real HTTP server playing the tool's host: records each request's path and headers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
                body = json.dumps({"celsius": 21, "path": self.path}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def api() -> Iterator[ApiServer]:
    server = ApiServer()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()
    server.thread.join(5)


@pytest.fixture
def secret_store(pincer_home: Path) -> Any:
    from pincer.secrets.store import SecretStore

    return SecretStore.open(pincer_home, key=KEY)
