"""A local OAuth 2.0 authorization server built with authlib's server side, and a Google API
stand-in behind it, on 127.0.0.1:0.

The authorization server is authlib's ``AuthorizationServer`` with its authorization code grant
(PKCE required: authlib's ``CodeChallenge``), refresh token grant and RFC 7009 revocation
endpoint, over ``http.server``; consent is given at once (``GET /authorize`` answers the 302 to
the redirect URI), recording the scopes asked for. ``/slack/...`` serves the same grants in
Slack's OAuth v2 shapes (``{"ok": true, ...}``, errors as 200 ``{"ok": false, "error"}``,
``auth.revoke`` with a bearer token).

Every other path is the Google stand-in: the bearer token must be one this server issued, not
expired or revoked (else Google's 401); the request is validated against Google's discovery
documents (:mod:`tests.builtins.googlediscovery`) and answered with a canned answer that is
validated against the response schema too. Problems land in ``errors`` (and the request gets 400).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    ClientMixin,
    OAuth2Request,
    TokenMixin,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge

from tests.builtins import googlediscovery

CLIENT_ID = "pincer-test-client.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-testClientSecret0123456789"
SERVER_POLL_INTERVAL_S = 0.02
USER = {"id": 1, "email": "me@example.com"}


@dataclass
class Client(ClientMixin):
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return None

    def get_allowed_scope(self, scope: str) -> str:
        return scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        # RFC 8252 7.3: any port on the loopback address.
        parts = urlsplit(redirect_uri)
        # (and the dashboard's callback of a person's own login, /ui/credentials/oauth/NAME/callback)
        return parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.path.endswith("/callback")

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "client_secret_post"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class Grant:
    """One consent: its refresh token; revoking it ends every access token it gave."""

    refresh_token: str
    scope: str
    client_id: str
    revoked: bool = False


@dataclass
class Token(TokenMixin):
    value: str
    grant: Grant
    expires_at: float
    is_refresh: bool = False

    def check_client(self, client: Any) -> bool:
        return bool(client.get_client_id() == self.grant.client_id)

    def get_scope(self) -> str:
        return self.grant.scope

    def get_expires_in(self) -> int:
        return int(self.expires_at - time.time())

    def is_expired(self) -> bool:
        return not self.is_refresh and time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.grant.revoked

    def get_user(self) -> Any:
        return USER

    def get_client(self) -> Any:
        return Client()


class _Request(OAuth2Request):
    def __init__(self, method: str, path: str, query: dict[str, str], form: dict[str, str], headers: Any) -> None:
        # authlib insists on https in what it reads; the transport here is loopback http.
        super().__init__(method, "https://auth.test" + path, headers=headers)
        self._args = query
        self._form = form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


@dataclass
class Seen:
    method: str
    path: str
    method_id: str | None
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeGoogle:
    server: ThreadingHTTPServer
    access_ttl_s: int = 3600
    codes: dict[str, Code] = field(default_factory=dict)
    grants: list[Grant] = field(default_factory=list)
    tokens: dict[str, Token] = field(default_factory=dict)
    consents: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    revocations: list[str] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)  # method id -> (status, body) override
    lock: threading.Lock = field(default_factory=threading.Lock)
    authz: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def config(self, *tools: str, extra: str = "") -> str:
        """config.toml with ``tools`` enabled, every Google API and the login pointed here."""
        lines = [f'[builtins.google]\nbase_url = "{self.base_url}"\nauthorization_url = "{self.base_url}/authorize"\n'
                 f'token_url = "{self.base_url}/token"\nrevocation_url = "{self.base_url}/revoke"\n',
                 f'[builtins.slack]\nauthorization_url = "{self.base_url}/slack/authorize"\n'
                 f'token_url = "{self.base_url}/slack/token"\nrevocation_url = "{self.base_url}/slack/revoke"\n']
        lines += [f"[builtins.{t}]\nenabled = true\n" for t in tools]
        return "\n".join(lines) + extra

    def live_access_tokens(self) -> list[str]:
        return [t.value for t in self.tokens.values() if not t.is_refresh and not t.is_expired() and not t.is_revoked()]

    def expire_access_tokens(self) -> None:
        """Every access token stops working (as after its hour), the refresh tokens go on."""
        with self.lock:
            for token in self.tokens.values():
                if not token.is_refresh:
                    token.expires_at = 0.0

    def revoke_all(self) -> None:
        """Every grant ends (Google's 7-day revocation of apps in testing status, a password change)."""
        with self.lock:
            for grant in self.grants:
                grant.revoked = True


def _authorization_server(state: FakeGoogle) -> AuthorizationServer:
    class Server(AuthorizationServer):
        def query_client(self, client_id: str) -> Any:
            return Client() if client_id == CLIENT_ID else None

        def save_token(self, token: dict[str, Any], request: Any) -> None:
            if token.get("refresh_token"):
                grant = Grant(refresh_token=token["refresh_token"], scope=token.get("scope", ""), client_id=CLIENT_ID)
                state.grants.append(grant)
                state.tokens[grant.refresh_token] = Token(value=grant.refresh_token, grant=grant,
                                                          expires_at=float("inf"), is_refresh=True)
            else:
                grant = request.refresh_token.grant
            state.tokens[token["access_token"]] = Token(value=token["access_token"], grant=grant,
                                                        expires_at=time.time() + token["expires_in"])

        def create_oauth2_request(self, request: Any) -> Any:
            return request

        def handle_response(self, status: int, body: Any, headers: Any) -> Any:
            return status, body, headers

        def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
            return None

    class CodeGrant(AuthorizationCodeGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_post",)

        def save_authorization_code(self, code: str, request: Any) -> None:
            data = request.payload.data
            state.codes[code] = Code(code=code, client_id=CLIENT_ID, redirect_uri=data.get("redirect_uri"),
                                     scope=data.get("scope", ""), code_challenge=data.get("code_challenge"),
                                     code_challenge_method=data.get("code_challenge_method"))

        def query_authorization_code(self, code: str, client: Any) -> Any:
            return state.codes.get(code)

        def delete_authorization_code(self, authorization_code: Any) -> None:
            state.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code: Any) -> Any:
            return USER

    class RefreshGrant(RefreshTokenGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_post",)
        INCLUDE_NEW_REFRESH_TOKEN = False  # Google keeps the refresh token

        def authenticate_refresh_token(self, refresh_token: str) -> Any:
            token = state.tokens.get(refresh_token)
            return token if token is not None and token.is_refresh and not token.is_revoked() else None

        def authenticate_user(self, refresh_token: Any) -> Any:
            return USER

        def revoke_old_credential(self, refresh_token: Any) -> None:
            return None

    class Revocation(RevocationEndpoint):
        CLIENT_AUTH_METHODS = ("client_secret_post",)

        def query_token(self, token_string: str, token_type_hint: str | None) -> Any:
            return state.tokens.get(token_string)

        def revoke_token(self, token: Any, request: Any) -> None:
            token.grant.revoked = True  # Google: revoking either token ends the grant
            state.revocations.append(token.value)

    server = Server()
    server.register_token_generator("default", BearerTokenGenerator(
        access_token_generator=lambda **_: "ya29.test-" + secrets.token_urlsafe(24),
        refresh_token_generator=lambda **_: "1//test-refresh-" + secrets.token_urlsafe(24),
        expires_generator=lambda client, grant_type: state.access_ttl_s,
    ))
    server.register_grant(CodeGrant, [CodeChallenge(required=True)])
    server.register_grant(RefreshGrant)
    server.register_endpoint(Revocation)
    return server


# Canned answers by discovery method id, each valid against the method's response schema.
FILE = {"id": "f1", "name": "report.txt", "mimeType": "text/plain", "size": "12", "modifiedTime": "2025-06-01T10:00:00Z",
        "parents": ["root"], "webViewLink": "https://drive.google.com/file/d/f1/view"}
EVENT = {"kind": "calendar#event", "id": "ev1", "status": "confirmed", "summary": "Standup",
         "start": {"dateTime": "2025-06-01T10:00:00+02:00"}, "end": {"dateTime": "2025-06-01T10:15:00+02:00"},
         "htmlLink": "https://www.google.com/calendar/event?eid=ev1", "organizer": {"email": "me@example.com"}}
MESSAGE = {"id": "18c1", "threadId": "18c0", "labelIds": ["INBOX", "UNREAD"], "snippet": "Hello there",
           "payload": {"mimeType": "text/plain", "headers": [{"name": "From", "value": "alice@example.com"},
                                                             {"name": "Subject", "value": "Hello"}],
                       "body": {"size": 11, "data": "SGVsbG8gdGhlcmU"}},
           "sizeEstimate": 100, "historyId": "1", "internalDate": "1700000000000"}
ANSWERS: dict[str, Any] = {
    "gmail.users.messages.list": {"messages": [{"id": "18c1", "threadId": "18c0"}], "resultSizeEstimate": 1,
                                  "nextPageToken": "p2"},
    "gmail.users.messages.get": MESSAGE,
    "gmail.users.messages.send": {"id": "18c2", "threadId": "18c0", "labelIds": ["SENT"]},
    "gmail.users.drafts.create": {"id": "r1", "message": {"id": "18c3", "threadId": "18c0"}},
    "gmail.users.labels.list": {"labels": [{"id": "INBOX", "name": "INBOX", "type": "system"}]},
    "gmail.users.messages.modify": {"id": "18c1", "threadId": "18c0", "labelIds": ["INBOX"]},
    "gmail.users.messages.trash": {"id": "18c1", "threadId": "18c0", "labelIds": ["TRASH"]},
    "calendar.calendarList.list": {"kind": "calendar#calendarList", "items": [
        {"id": "me@example.com", "summary": "Me", "primary": True, "accessRole": "owner", "timeZone": "Europe/Berlin"}]},
    "calendar.events.list": {"kind": "calendar#events", "timeZone": "Europe/Berlin", "items": [EVENT]},
    "calendar.events.get": EVENT,
    "calendar.events.insert": EVENT,
    "calendar.events.patch": EVENT,
    "calendar.events.delete": None,
    "drive.files.list": {"files": [FILE], "nextPageToken": "n2"},
    "drive.files.get": FILE,
    "drive.files.export": b"exported text\n",
    "drive.files.create": FILE,
    "drive.files.update": {**FILE, "trashed": True},
    "docs.documents.get": {"documentId": "d1", "title": "Notes", "body": {"content": [
        {"paragraph": {"elements": [{"textRun": {"content": "Hello\n"}}]}}]}},
    "docs.documents.create": {"documentId": "d2", "title": "New"},
    "docs.documents.batchUpdate": {"documentId": "d1", "replies": [{}]},
    "sheets.spreadsheets.get": {"spreadsheetId": "s1", "properties": {"title": "Budget"},
                                "sheets": [{"properties": {"sheetId": 0, "title": "Sheet1"}}]},
    "sheets.spreadsheets.values.get": {"range": "Sheet1!A1:B2", "majorDimension": "ROWS",
                                       "values": [["a", "b"], ["1", "2"]]},
    "sheets.spreadsheets.values.update": {"spreadsheetId": "s1", "updatedRange": "Sheet1!A1:B2", "updatedRows": 2,
                                          "updatedColumns": 2, "updatedCells": 4},
    "sheets.spreadsheets.values.append": {"spreadsheetId": "s1", "tableRange": "Sheet1!A1:B2", "updates": {
        "spreadsheetId": "s1", "updatedRange": "Sheet1!A3:B3", "updatedRows": 1, "updatedCells": 2}},
    "sheets.spreadsheets.create": {"spreadsheetId": "s2", "properties": {"title": "New"}},
    "slides.presentations.get": {"presentationId": "p1", "title": "Deck", "slides": [{"objectId": "s1", "pageElements": [
        {"objectId": "e1", "shape": {"shapeType": "TEXT_BOX", "text": {"textElements": [{"textRun": {"content": "Title\n"}}]}}}]}]},
    "slides.presentations.create": {"presentationId": "p2", "title": "New"},
    "slides.presentations.batchUpdate": {"presentationId": "p1", "replies": [{"createSlide": {"objectId": "s2"}}]},
}
MEDIA = b"hello world\n"


class _Handler(BaseHTTPRequestHandler):
    state: FakeGoogle

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        try:
            self._serve()
        except Exception as exc:  # the test reads errors; the client sees a 500
            self.state.errors.append(f"server: {type(exc).__name__}: {exc}")
            self._reply(500, json.dumps({"error": "server_error"}))

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        slack = parts.path.startswith("/slack/")
        route = parts.path.removeprefix("/slack")
        if route in ("/authorize", "/token", "/revoke"):
            with self.state.lock:
                self._oauth(route, dict(parse_qsl(parts.query)), dict(parse_qsl(body.decode())), slack)
            return
        self._google(body)

    # ------------------------------------------------------------------ the authorization server

    def _oauth(self, route: str, query: dict[str, str], form: dict[str, str], slack: bool) -> None:
        state = self.state
        headers = dict(self.headers.items())
        request = _Request(self.command, route, query, form, headers)
        if route == "/authorize":
            state.consents.append(dict(query))
            grant = state.authz.get_consent_grant(request=request, end_user=USER)
            status, payload, out = state.authz.create_authorization_response(request=request, grant_user=USER,
                                                                             grant=grant)
            return self._reply(status, payload if isinstance(payload, bytes | str) else json.dumps(payload or {}),
                               dict(out))
        if route == "/token":
            state.token_requests.append(dict(form))
            status, payload, _ = state.authz.create_token_response(request=request)
            if slack:
                payload = _slack_shape(status, payload)
                status = 200
            return self._reply(status, json.dumps(payload), {"Content-Type": "application/json"})
        if slack:  # auth.revoke: the token is the bearer header
            value = headers.get("Authorization", "").removeprefix("Bearer ")
            token = state.tokens.get(value)
            if token is None or token.is_revoked():
                return self._reply(200, json.dumps({"ok": False, "error": "invalid_auth"}))
            token.grant.revoked = True
            state.revocations.append(value)
            return self._reply(200, json.dumps({"ok": True, "revoked": True}))
        status, payload, _ = state.authz.create_endpoint_response("revocation", request=request)
        return self._reply(status, json.dumps(payload), {"Content-Type": "application/json"})

    # ----------------------------------------------------------------------------- the Google APIs

    def _google(self, body: bytes) -> None:
        state = self.state
        auth = self.headers.get("Authorization", "")
        method_id, problems = googlediscovery.validate_request(
            self.command, self.path, body, self.headers.get("Content-Type", ""))
        with state.lock:
            state.requests.append(Seen(method=self.command, path=self.path, method_id=method_id,
                                       headers=dict(self.headers.items()), body=body))
            token = state.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
            live = token is not None and not token.is_refresh and not token.is_expired() and not token.is_revoked()
        if not live:
            return self._reply(401, json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED",
                                                          "message": "Request had invalid authentication credentials."}}))
        if problems or method_id is None:
            state.errors.extend(problems)
            return self._reply(400, json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                          "message": "; ".join(problems)}}))
        status, answer = state.answers.get(method_id, (200, ANSWERS.get(method_id)))
        media = "alt=media" in self.path
        if media or isinstance(answer, bytes):
            return self._reply(status, MEDIA if media else answer, {"Content-Type": "application/octet-stream"})
        if answer is None:
            return self._reply(204, b"")
        if status == 200:
            state.errors.extend(googlediscovery.validate_response(method_id, answer))
        return self._reply(status, json.dumps(answer))

    def _reply(self, status: int, body: bytes | str, headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for key, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _slack_shape(status: int, payload: Any) -> dict[str, Any]:
    if status != 200:
        return {"ok": False, "error": (payload or {}).get("error", "invalid_code")}
    return {"ok": True, "access_token": payload["access_token"], "token_type": "bot",
           "scope": payload.get("scope", "").replace(" ", ","), "bot_user_id": "U0BOT", "app_id": "A0APP",
           "team": {"id": "T0TEAM", "name": "Team"}}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@contextmanager
def serve() -> Iterator[FakeGoogle]:
    handler = type("Handler", (_Handler,), {})
    server = _QuietServer(("127.0.0.1", 0), handler)
    state = FakeGoogle(server=server)
    state.authz = _authorization_server(state)
    handler.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SERVER_POLL_INTERVAL_S},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
