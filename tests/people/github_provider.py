"""A local GitHub for the GitHub sign-in tests: a real HTTP server on 127.0.0.1:0 laid out as
GitHub Enterprise Server is (the web at ``/``, the REST API at ``/api/v3``), speaking the parts of
GitHub's OAuth and REST API the sign-in uses.

- ``GET /login/oauth/authorize``: signs in ``next_user`` at once and redirects back with a code,
  after checking the client id and an S256 code challenge;
- ``POST /login/oauth/access_token``: trades a code once, answering JSON only when asked
  (``Accept: application/json``, as GitHub does); a used, unknown or PKCE-failing code, a wrong
  secret or redirect URI is GitHub's own answer: HTTP 200 with ``{"error": ...}``;
- ``GET /api/v3/user``, ``/user/emails``, ``/user/orgs``, ``/user/teams`` with the token: their
  bodies are GitHub's published examples (npm ``@octokit/openapi``, tests/builtins/fakegithub.py)
  with the user's own login, emails, orgs and teams put in, paged by ``per_page``/``page`` with a
  ``Link`` header; every exchange is validated against the description (``errors``).

``tamper`` spoils the next ``GET /user``: ``oversized`` (2 MB), ``not_json``, ``no_login``; or
every listing's ``Link`` (``foreign_next``: the next page on another origin).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.builtins import fakegithub
from tests.localservers import _QuietServer, running

CLIENT_ID = "Iv1.pincerdashboard01"
CLIENT_SECRET = "github-client-secret-0123456789abcdef0123"
API_PREFIX = "/api/v3"
_ERROR_URI = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"


@dataclass
class GitHubUserSpec:
    login: str
    emails: list[dict[str, Any]]  # GitHub's shape: email, primary, verified, visibility
    orgs: list[str] = field(default_factory=list)
    teams: list[tuple[str, str]] = field(default_factory=list)  # (org, slug)


def email(address: str, *, primary: bool = False, verified: bool = True) -> dict[str, Any]:
    return {"email": address, "primary": primary, "verified": verified, "visibility": "private" if primary else None}


@dataclass
class GitHub:
    url: str = ""
    next_user: GitHubUserSpec | None = None
    tamper: str | None = None
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, GitHubUserSpec] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)  # every access token handed out
    token_requests: list[dict[str, str]] = field(default_factory=list)
    api_calls: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def api_url(self) -> str:
        return self.url + API_PREFIX


def _example(path: str) -> Any:
    found = fakegithub.operation("GET", path)
    assert found is not None, path
    _status, example = fakegithub.example_answer(found[1])
    return fakegithub.conform(example, fakegithub.success_schema(found[1]))


class _Handler(BaseHTTPRequestHandler):
    github: GitHub

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, *, kind: str = "application/json") -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body:
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        g = self.github
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/login/oauth/authorize":
            if query.get("client_id") != CLIENT_ID or query.get("code_challenge_method") != "S256" or not query.get("code_challenge") \
                    or g.next_user is None:  # fmt: skip
                self._send(404, b"<html>not found</html>", kind="text/html")
                return
            code = secrets.token_hex(10)
            g.codes[code] = {"user": g.next_user, "challenge": query["code_challenge"], "redirect_uri": query.get("redirect_uri", "")}
            back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query.get("state", "")})
            self._send(302, b"", {"Location": back})
        elif parts.path.startswith(API_PREFIX + "/"):
            self._api(parts.path.removeprefix(API_PREFIX), query)
        else:
            self._send(404, json.dumps({"message": "Not Found"}).encode())

    def _api(self, path: str, query: dict[str, str]) -> None:
        g = self.github
        g.api_calls.append(path)
        auth = self.headers.get("Authorization", "")
        user = g.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if user is None:
            body = {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"}
            self._send(401, json.dumps(body).encode())
            return
        if path == "/user":
            tamper = g.tamper if g.tamper in ("oversized", "not_json", "no_login") else None
            g.tamper = None if tamper else g.tamper
            if tamper == "oversized":
                self._send(200, json.dumps({"login": user.login, "bio": "x" * 2_000_000}).encode())
                return
            if tamper == "not_json":
                self._send(200, b"<html>upstream error</html>")
                return
            profile = _example("/user") | {"login": user.login, "email": user.emails[0]["email"] if user.emails else None}
            if tamper == "no_login":
                del profile["login"]
            self._answer(path, query, profile)
        elif path == "/user/emails":
            self._page(path, query, [dict(e) for e in user.emails])
        elif path == "/user/orgs":
            base = _example("/user/orgs")[0]
            self._page(path, query, [base | {"login": org, "url": f"{g.api_url}/orgs/{org}"} for org in user.orgs])
        elif path == "/user/teams":
            base = _example("/user/teams")[0]
            self._page(path, query, [base | {"slug": slug, "name": slug, "organization": base["organization"] | {"login": org}}
                                     for org, slug in user.teams])  # fmt: skip
        else:
            self._send(404, json.dumps({"message": "Not Found"}).encode())

    def _page(self, path: str, query: dict[str, str], items: list[Any]) -> None:
        per_page, page = int(query.get("per_page", "30")), int(query.get("page", "1"))
        headers = {}
        if page * per_page < len(items):
            origin = "http://elsewhere.test/api/v3" if self.github.tamper == "foreign_next" else self.github.api_url
            headers["Link"] = f'<{origin}{path}?{urlencode({"per_page": per_page, "page": page + 1})}>; rel="next"'
        self._answer(path, query, items[(page - 1) * per_page : page * per_page], headers)

    def _answer(self, path: str, query: dict[str, str], value: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(value).encode()
        raw_path = path + ("?" + urlencode(query) if query else "")
        self.github.errors.extend(fakegithub.validate_exchange("GET", raw_path, b"", 200, body))
        self._send(200, body, headers)

    def do_POST(self) -> None:
        g = self.github
        length = int(self.headers.get("Content-Length", "0"))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        g.token_requests.append(form)
        if urlsplit(self.path).path != "/login/oauth/access_token":
            self._send(404, json.dumps({"message": "Not Found"}).encode())
            return
        login = g.codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            answer: dict[str, str] = {"error": "incorrect_client_credentials",
                                      "error_description": "The client_id and/or client_secret passed are incorrect."}  # fmt: skip
        elif login is None or challenge != login["challenge"]:
            answer = {"error": "bad_verification_code", "error_description": "The code passed is incorrect or expired."}
        elif form.get("redirect_uri") != login["redirect_uri"]:
            answer = {"error": "redirect_uri_mismatch", "error_description": "The redirect_uri MUST match the registered callback URL for this application."}
        else:
            token = "gho_" + secrets.token_hex(18)
            g.tokens[token] = login["user"]
            g.issued.append(token)
            answer = {"access_token": token, "token_type": "bearer", "scope": "read:org,read:user,user:email"}
        if "error" in answer:
            answer["error_uri"] = _ERROR_URI
        if "application/json" in self.headers.get("Accept", ""):
            self._send(200, json.dumps(answer).encode())
        else:  # GitHub's default: form-encoded
            self._send(200, urlencode(answer).encode(), kind="application/x-www-form-urlencoded")

    def log_message(self, *args: Any) -> None:
        return


@contextmanager
def github_stand_in() -> Iterator[GitHub]:
    fakegithub.openapi()  # load the description before the first request, not inside its timeout
    github = GitHub()
    handler = type("Handler", (_Handler,), {"github": github})
    server = _QuietServer(("127.0.0.1", 0), handler)
    github.url = f"http://127.0.0.1:{server.server_address[1]}"
    with running(server):
        yield github
