"""A local OpenID Connect provider for the single sign-on tests: a real HTTP server on
127.0.0.1:0 speaking the protocol's parts pincer uses, its tokens signed with joserfc.

- ``/.well-known/openid-configuration``: the discovery document;
- ``/jwks``: the public key set;
- ``/authorize``: signs in ``next_user`` at once (no form) and redirects back with a code, after
  checking the request (response_type code, the client id, an S256 code challenge);
- ``/token``: trades a code once for an access token and an id_token (which carries the
  access token's ``at_hash``, OIDC Core 3.1.3.6), checking the redirect URI, the client and the
  PKCE verifier against the challenge.

``tamper`` makes the next id_token wrong in one way: ``forged`` (signed by another key under the
same key id), ``expired``, ``wrong_audience``, ``wrong_issuer``, ``replayed_nonce`` (the nonce of
the login before), ``no_nonce``, ``forged_at_hash`` (the at_hash of another access token: an
id_token spliced onto a token response it was not issued with), ``no_access_token`` (an id_token
with an at_hash, in an answer with no access token to check it against).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from tests.localservers import _QuietServer, running

CLIENT_ID = "pincer-dashboard"
CLIENT_SECRET = "oidc-client-secret-0123456789abcdef"


def at_hash(access_token: str) -> str:
    """OIDC Core 3.1.3.6 for RS256, written out here (not pincer's code) so the test checks pincer
    against the spec: the left half of the SHA-256 of the token's ASCII, base64url unpadded."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=").decode()


@dataclass
class Provider:
    url: str = ""
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    next_user: dict[str, Any] = field(default_factory=dict)
    tamper: str | None = None
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    nonces: list[str] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)

    def id_token(self, login: dict[str, Any], access_token: str) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"iss": self.url, "sub": login["user"]["email"], "aud": CLIENT_ID, "iat": now,
                                  "exp": now + 300, "nonce": login["nonce"], "at_hash": at_hash(access_token),
                                  **login["user"]}  # fmt: skip
        key = self.key
        tamper, self.tamper = self.tamper, None
        if tamper == "forged":
            key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        elif tamper == "expired":
            claims.update(iat=now - 7200, exp=now - 3600)
        elif tamper == "wrong_audience":
            claims["aud"] = "someone-else"
        elif tamper == "wrong_issuer":
            claims["iss"] = self.url + "/other"
        elif tamper == "replayed_nonce":
            claims["nonce"] = self.nonces[-2]
        elif tamper == "no_nonce":
            del claims["nonce"]
        elif tamper == "forged_at_hash":
            claims["at_hash"] = at_hash("at-" + secrets.token_urlsafe(8))
        return jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)


class _Handler(BaseHTTPRequestHandler):
    provider: Provider

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        p = self.provider
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/.well-known/openid-configuration":
            self._send(200, {"issuer": p.url, "authorization_endpoint": p.url + "/authorize", "token_endpoint": p.url + "/token",
                             "jwks_uri": p.url + "/jwks", "response_types_supported": ["code"],
                             "id_token_signing_alg_values_supported": ["RS256"], "code_challenge_methods_supported": ["S256"]})  # fmt: skip
        elif parts.path == "/jwks":
            self._send(200, KeySet([p.key]).as_dict(private=False))
        elif parts.path == "/authorize":
            if (query.get("response_type"), query.get("client_id"), query.get("code_challenge_method")) != ("code", CLIENT_ID, "S256") \
                    or "openid" not in query.get("scope", "").split() or not query.get("code_challenge") or not query.get("nonce"):  # fmt: skip
                self._send(400, {"error": "invalid_request"})
                return
            code = secrets.token_urlsafe(16)
            p.nonces.append(query["nonce"])
            p.codes[code] = {"user": dict(p.next_user), "nonce": query["nonce"], "challenge": query["code_challenge"],
                             "redirect_uri": query["redirect_uri"]}  # fmt: skip
            back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query["state"]})
            self._send(302, headers={"Location": back})
        else:
            self._send(404, {"error": "not_found"})

    def do_POST(self) -> None:
        p = self.provider
        length = int(self.headers.get("Content-Length", "0"))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        p.token_requests.append(form)
        login = p.codes.pop(form.get("code", ""), None)
        if urlsplit(self.path).path != "/token" or login is None:
            self._send(400, {"error": "invalid_grant"})
            return
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != login["challenge"] or form.get("redirect_uri") != login["redirect_uri"] \
                or form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:  # fmt: skip
            self._send(400, {"error": "invalid_grant"})
            return
        access_token = "at-" + secrets.token_urlsafe(8)
        answer = {"access_token": access_token, "token_type": "Bearer"}
        if p.tamper == "no_access_token":
            del answer["access_token"]
        self._send(200, answer | {"id_token": p.id_token(login, access_token)})

    def log_message(self, *args: Any) -> None:
        return


@contextmanager
def oidc_provider() -> Iterator[Provider]:
    provider = Provider()
    handler = type("Handler", (_Handler,), {"provider": provider})
    server = _QuietServer(("127.0.0.1", 0), handler)
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    with running(server):
        yield provider
