"""An OAuth 2.0 token endpoint for the client credentials grant (RFC 6749 4.4), authlib's server
side over ``http.server`` on 127.0.0.1:0, with an OpenID Connect discovery document.

``POST /token``: authlib's ``ClientCredentialsGrant``, the client authenticated with HTTP Basic
(client_secret_basic); ``GET /.well-known/openid-configuration``: the discovery document naming
that token endpoint. Everything else answers 404. ``issued`` holds (token, scope) per grant.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator

from tests.localservers import running

CLIENT_ID = "openapi-cc-client"
CLIENT_SECRET = "cc-secret-5f0a2b7c9d"


@dataclass
class _Client(ClientMixin):
    def get_client_id(self) -> str:
        return CLIENT_ID

    def get_default_redirect_uri(self) -> str | None:
        return None

    def get_allowed_scope(self, scope: str) -> str:
        return scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, CLIENT_SECRET)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "client_secret_basic"

    def check_response_type(self, response_type: str) -> bool:
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"


class _Request(OAuth2Request):
    def __init__(self, path: str, form: dict[str, str], headers: Any) -> None:
        super().__init__("POST", "https://auth.test" + path, headers=headers)  # authlib reads https URLs only
        self._form = form
        self.payload = BasicOAuth2Payload(form)

    @property
    def form(self) -> dict[str, str]:
        return self._form


@dataclass
class TokenServer:
    server: ThreadingHTTPServer
    issued: list[tuple[str, str]] = field(default_factory=list)  # (access token, scope)
    lock: threading.Lock = field(default_factory=threading.Lock)
    authz: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def _authorization_server(state: TokenServer) -> AuthorizationServer:
    class Server(AuthorizationServer):
        def query_client(self, client_id: str) -> Any:
            return _Client() if client_id == CLIENT_ID else None

        def save_token(self, token: dict[str, Any], request: Any) -> None:
            state.issued.append((token["access_token"], token.get("scope", "")))

        def create_oauth2_request(self, request: Any) -> Any:
            return request

        def handle_response(self, status: int, body: Any, headers: Any) -> Any:
            return status, body, headers

        def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
            return None

    server = Server()
    server.register_token_generator("default", BearerTokenGenerator(
        access_token_generator=lambda **_: "cc-" + secrets.token_urlsafe(24),
        expires_generator=lambda client, grant_type: 3600,
    ))
    server.register_grant(ClientCredentialsGrant)
    return server


class _Handler(BaseHTTPRequestHandler):
    state: TokenServer

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/.well-known/openid-configuration":
            base = self.state.base_url
            self._reply(200, {"issuer": base, "token_endpoint": f"{base}/token",
                              "grant_types_supported": ["client_credentials"], "scopes_supported": ["read", "write"]})
        else:
            self._reply(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(parse_qsl(self.rfile.read(length).decode())) if length else {}
        if urlsplit(self.path).path != "/token":
            self._reply(404, {"error": "not_found"})
            return
        with self.state.lock:
            status, payload, _ = self.state.authz.create_token_response(
                request=_Request("/token", form, dict(self.headers.items())))
        self._reply(status, payload)

    def _reply(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@contextmanager
def serve() -> Iterator[TokenServer]:
    handler = type("Handler", (_Handler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    state = TokenServer(server=server)
    state.authz = _authorization_server(state)
    handler.state = state
    with running(server):
        yield state
