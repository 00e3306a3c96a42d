"""A real HTTP server on 127.0.0.1:0 that checks every request it receives against an OpenAPI
document with openapi-core (an independent implementation: parameters, their styles as
openapi-core reads them, bodies by media type, required security). It answers 200
``{"valid": true}`` or 400 ``{"errors": [...]}`` and records both."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest
from werkzeug.datastructures import Headers, ImmutableMultiDict

from tests.localservers import running


@dataclass
class Checked:
    line: str
    errors: list[str]


@dataclass
class ValidatingServer:
    server: ThreadingHTTPServer
    api: Any = None
    seen: list[Checked] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    state: ValidatingServer
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        cookie = SimpleCookie()
        cookie.load(self.headers.get("Cookie", ""))
        request = MockRequest(
            self.state.base_url, self.command.lower(), parts.path,
            args=ImmutableMultiDict(parse_qsl(parts.query, keep_blank_values=True)),
            headers=Headers(list(self.headers.items())),
            cookies=ImmutableMultiDict({k: v.value for k, v in cookie.items()}),
            data=body, content_type=self.headers.get("Content-Type"),
        )
        try:
            self.state.api.validate_request(request)
            errors: list[str] = []
        except Exception as exc:  # openapi-core's validation errors, with their causes
            errors = [f"{type(exc).__name__}: {exc}"] + [f"{type(c).__name__}: {c}" for c in _causes(exc)]
        self.state.seen.append(Checked(self.requestline, errors))
        payload = json.dumps({"valid": True} if not errors else {"errors": errors}).encode()
        self.send_response(200 if not errors else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def log_message(self, *args: Any) -> None:
        return


def _causes(exc: BaseException) -> list[BaseException]:
    found = []
    for inner in getattr(exc, "schema_errors", None) or ():
        found.append(inner)
    cause = exc.__cause__
    while cause is not None:
        found.append(cause)
        found.extend(getattr(cause, "schema_errors", None) or ())
        cause = cause.__cause__
    return found


@contextmanager
def serve(document: Mapping[str, Any]) -> Iterator[ValidatingServer]:
    """Serve ``document`` (its servers replaced by this server's address)."""
    handler = type("Handler", (_Handler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    state = ValidatingServer(server=server)
    state.api = OpenAPI.from_dict({**document, "servers": [{"url": state.base_url}]})
    handler.state = state
    with running(server):
        yield state
