"""securitySchemes mapped to secrets and sent only where an operation's ``security`` asks, to a
real server on 127.0.0.1 that records what arrives; OAuth 2.0 through pincer's OAuth against
authlib's authorization servers (client credentials, OpenID Connect discovery, the
authorization code login of ``pincer openapi login``, refreshed when it expires).

Failed before the fix: the schemes were not read at all (no credential unless --auth), and
--auth was injected into operations the document marks anonymous (``security: [{}]``).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from pincer.cli.main import app as cli
from pincer.core.effects import EffectKind
from tests import localservers
from tests.builtins import fakegoogle
from tests.runtimes.openapi import ccserver
from tests.runtimes.openapi.chain import KEY, add_document, call, open_pincer, set_secrets

pytestmark = pytest.mark.anyio

SCHEMES = {
    "api_key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
    "query_key": {"type": "apiKey", "in": "query", "name": "key"},
    "cookie_key": {"type": "apiKey", "in": "cookie", "name": "sid"},
    "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
    "basic": {"type": "http", "scheme": "basic"},
    "digest": {"type": "http", "scheme": "digest"},
}
SECRETS = {"sec_api_key": "hdr-7f3a91c2", "sec_query_key": "qry-55d0e1b8", "sec_cookie_key": "ck-0b9e4d2a",
           "sec_bearer": "tok-a8c3f0e6d1"}


def op(op_id: str, security: Any = "inherit", params: list[Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": op_id, "responses": {"200": {"description": "echo"}}}
    if security != "inherit":
        operation["security"] = security
    if params:
        operation["parameters"] = params
    return {"get": operation}


DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "secured", "version": "1"},
    "security": [{"api_key": []}],
    "components": {"securitySchemes": SCHEMES},
    "paths": {
        "/default": op("default", params=[{"name": "X-Api-Key", "in": "header", "schema": {"type": "string"}}]),
        "/open": op("open", []),
        "/open2": op("open2", [{}]),
        "/optional": op("optional", [{}, {"bearer": []}]),
        "/both": op("both", [{"api_key": [], "query_key": []}]),
        "/either": op("either", [{"basic": []}, {"cookie_key": []}]),
        "/digest": op("digest", [{"digest": []}]),
    },
}
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "cookie")


@pytest.fixture
def echo() -> Iterator[localservers.LocalServer]:
    with localservers.serve() as server:
        yield server


def sent(server: localservers.LocalServer) -> tuple[str, dict[str, str]]:
    """The last request's target and its credential-bearing headers."""
    last = server.requests[-1]
    return last.path, {k.lower(): v for k, v in last.headers.items() if k.lower() in CREDENTIAL_HEADERS}


async def test_credentials_go_only_where_security_asks(tmp_path: Path, echo: localservers.LocalServer) -> None:
    home = tmp_path / "home"
    imported = add_document(home, "sec", DOCUMENT, echo.url("/echo"))
    assert {s.key: s.secret for s in imported.service.schemes} == {k: f"sec_{k}" for k in SCHEMES}
    set_secrets(home, SECRETS)
    async with open_pincer(home) as p:
        # The header the scheme fills is not an argument; anonymous operations use no secret.
        assert "X-Api-Key" not in p.registry.get("sec_default").input_schema["properties"]
        assert EffectKind.USE_SECRET in p.registry.get("sec_default").effects
        for anonymous in ("sec_open", "sec_open2"):
            spec = p.registry.get(anonymous)
            assert EffectKind.USE_SECRET not in spec.effects and spec.capabilities.secrets_allowed_names == ()
        expected = {
            "sec_default": ("/echo/default", {"x-api-key": "hdr-7f3a91c2"}),
            "sec_open": ("/echo/open", {}),
            "sec_open2": ("/echo/open2", {}),
            "sec_optional": ("/echo/optional", {"authorization": "Bearer tok-a8c3f0e6d1"}),
            "sec_both": ("/echo/both?key=qry-55d0e1b8", {"x-api-key": "hdr-7f3a91c2"}),
            "sec_either": ("/echo/either", {"cookie": "sid=ck-0b9e4d2a"}),  # basic is not set: the second way
        }
        for tool, want in expected.items():
            result = await call(p, tool, {})
            assert result.ok, (tool, result.error)
            assert sent(echo) == want, tool
            # The echo carries the credential back: the leak scan takes it out of the output.
            assert not any(v in json.dumps(result.output) for v in SECRETS.values()), tool
        result = await call(p, "sec_digest", {})
        assert not result.ok and "HTTP 'digest' authentication" in result.error["message"]
        count = len(echo.requests)
    set_secrets(home, {"sec_basic": "ana:pa ss:w0rd"})
    async with open_pincer(home) as p:
        result = await call(p, "sec_either", {})
        assert result.ok
        assert sent(echo)[1] == {"authorization": "Basic " + base64.b64encode(b"ana:pa ss:w0rd").decode()}
    assert len(echo.requests) == count + 1


async def test_a_missing_credential_is_named_with_the_command_that_sets_it(
    tmp_path: Path, echo: localservers.LocalServer
) -> None:
    home = tmp_path / "home"
    add_document(home, "sec", DOCUMENT, echo.url("/echo"))
    set_secrets(home, {"sec_api_key": SECRETS["sec_api_key"]})
    async with open_pincer(home) as p:
        result = await call(p, "sec_both", {})
        assert not result.ok and result.error["code"] == "secret_error"
        assert "sec_query_key" in result.error["message"] and "`pincer secrets set sec_api_key`" in result.error["hint"]
        result = await call(p, "sec_optional", {})  # [{}, {bearer}] without the bearer secret: anonymous
        assert result.ok and sent(echo) == ("/echo/optional", {})
    assert [r.path for r in echo.requests] == ["/echo/optional"]  # the refused call sent nothing


async def test_add_says_which_schemes_it_found_and_what_to_set(tmp_path: Path, echo: localservers.LocalServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[network]\nallow_private = true\n")
    spec = home / "doc.json"
    spec.write_text(json.dumps(DOCUMENT))
    env = {"PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY.hex(), "COLUMNS": "300"}
    args = ["openapi", "add", "sec", "--spec", str(spec), "--base-url", echo.url("/echo"), "--secret", "bearer=my_token"]
    human = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, args, env=env))
    assert human.exit_code == 0, human.stderr
    text = " ".join(human.stderr.split())
    assert "scheme api_key: API key in header 'X-Api-Key', used by 2 operations; `pincer secrets set sec_api_key`" in text
    assert "scheme bearer: HTTP bearer, used by 1 operations; `pincer secrets set my_token`" in text
    assert "scheme digest: HTTP digest, used by 1 operations; not supported" in text
    assert "2 operations are called without credentials" in text
    listed = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, ["openapi", "list", "--json"], env=env))
    (service,) = json.loads(listed.stdout)
    rows = {row["scheme"]: row for row in service["schemes"]}
    assert rows["basic"]["how_to_set"] == "`pincer secrets set sec_basic` (user:password)" and rows["basic"]["operations"] == 1
    bad = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, [*args[:-1], "nope=x", "--replace"], env=env))
    assert bad.exit_code == 2 and "--secret names scheme 'nope'" in " ".join(bad.stderr.split())


async def test_auth_option_is_not_sent_to_operations_the_document_marks_anonymous(
    tmp_path: Path, echo: localservers.LocalServer
) -> None:
    """Attack: with --auth the key went to every operation, the anonymous ones too (a key for
    one API sent where the document says none is wanted). Failed before the fix: the server got
    X-Api-Key on GET /echo/open2 (security: [{}])."""
    home = tmp_path / "home"
    add_document(home, "sec", {**DOCUMENT, "components": {}, "security": None}, echo.url("/echo"),
                 auth="header:X-Api-Key", auth_secret="one_key")
    set_secrets(home, {"one_key": "k-1d2e3f"})
    async with open_pincer(home) as p:
        for tool, want in (("sec_open2", {}), ("sec_open", {}), ("sec_default", {"x-api-key": "k-1d2e3f"}),
                           ("sec_both", {"x-api-key": "k-1d2e3f"})):
            result = await call(p, tool, {})
            assert result.ok, result.error
            assert sent(echo)[1] == want, tool


# -- OAuth 2.0 ---------------------------------------------------------------------------------


@pytest.fixture
def tokens() -> Iterator[ccserver.TokenServer]:
    with ccserver.serve() as server:
        yield server


def oauth_document(schemes: dict[str, Any], security: list[Any]) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "o", "version": "1"}, "components": {"securitySchemes": schemes},
            "paths": {"/me": op("me", security), "/public": op("public", [])}}


async def test_client_credentials_token_is_fetched_for_the_scopes_asked_and_kept(
    tmp_path: Path, echo: localservers.LocalServer, tokens: ccserver.TokenServer
) -> None:
    home = tmp_path / "home"
    schemes = {"cc": {"type": "oauth2", "flows": {"clientCredentials": {
        "tokenUrl": f"{tokens.base_url}/token", "scopes": {"read": "r", "write": "w"}}}}}
    add_document(home, "oa", oauth_document(schemes, [{"cc": ["read"]}]), echo.url("/echo"))
    async with open_pincer(home) as p:
        result = await call(p, "oa_me", {})
        assert not result.ok and "`pincer secrets set oa_cc_client_id`" in result.error["hint"]
    assert tokens.issued == [] and echo.requests == []
    set_secrets(home, {"oa_cc_client_id": ccserver.CLIENT_ID, "oa_cc_client_secret": ccserver.CLIENT_SECRET})
    async with open_pincer(home) as p:
        for _ in range(2):
            result = await call(p, "oa_me", {})
            assert result.ok, result.error
        assert len(tokens.issued) == 1 and tokens.issued[0][1] == "read"  # one token, for the scope asked, reused
        assert sent(echo)[1] == {"authorization": f"Bearer {tokens.issued[0][0]}"}
        assert tokens.issued[0][0] not in json.dumps(result.output)  # the echoed token is redacted
        result = await call(p, "oa_public", {})
        assert result.ok and sent(echo)[1] == {}


async def test_openid_connect_discovery_at_add(
    tmp_path: Path, echo: localservers.LocalServer, tokens: ccserver.TokenServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[network]\nallow_private = true\n")
    doc = oauth_document({"oidc": {"type": "openIdConnect",
                                   "openIdConnectUrl": f"{tokens.base_url}/.well-known/openid-configuration"}},
                         [{"oidc": ["write"]}])
    spec = home / "doc.json"
    spec.write_text(json.dumps(doc))
    env = {"PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY.hex()}
    args = ["openapi", "add", "oi", "--spec", str(spec), "--base-url", echo.url("/echo"), "--json"]
    added = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, args, env=env))
    assert added.exit_code == 0, added.stderr
    (row,) = json.loads(added.stdout)["schemes"]
    assert row["summary"].endswith("(clientCredentials)") and "oi_oidc_client_id" in row["how_to_set"]
    set_secrets(home, {"oi_oidc_client_id": ccserver.CLIENT_ID, "oi_oidc_client_secret": ccserver.CLIENT_SECRET})
    async with open_pincer(home) as p:
        result = await call(p, "oi_me", {})
        assert result.ok, result.error
    assert sent(echo)[1] == {"authorization": f"Bearer {tokens.issued[0][0]}"} and tokens.issued[0][1] == "write"


BROWSER_SCRIPT = """
import sys, httpx
answer = httpx.get(sys.argv[1], follow_redirects=False, timeout=30)
httpx.get(answer.headers["location"], timeout=30)
"""


def test_authorization_code_login_then_calls_and_refresh(tmp_path: Path) -> None:
    """`pincer openapi login` against authlib's authorization server (the "browser" consents and
    follows the redirect to the loopback listener); calls then carry the token, and a token about
    to expire is refreshed before the call."""
    home = tmp_path / "home"
    with fakegoogle.serve() as auth, localservers.serve() as api:
        auth.access_ttl_s = 30  # inside the refresh leeway: every call refreshes first
        schemes = {"code": {"type": "oauth2", "flows": {"authorizationCode": {
            "authorizationUrl": f"{auth.base_url}/authorize", "tokenUrl": f"{auth.base_url}/token",
            "scopes": {"files.read": "read files"}}}}}
        add_document(home, "ac", oauth_document(schemes, [{"code": ["files.read"]}]), api.url("/echo"))
        (home / "config.toml").write_text("[network]\nallow_private = true\n")
        set_secrets(home, {"ac_code_client_id": fakegoogle.CLIENT_ID, "ac_code_client_secret": fakegoogle.CLIENT_SECRET})
        browser = tmp_path / "browser.py"
        browser.write_text(BROWSER_SCRIPT)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "BROWSER"))}
        env.update({"PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY.hex(), "BROWSER": f"{sys.executable} {browser} %s"})
        login = subprocess.run([sys.executable, "-m", "pincer.cli", "openapi", "login", "ac", "--json"],
                               capture_output=True, text=True, env=env, timeout=120)
        assert login.returncode == 0, login.stderr
        assert json.loads(login.stdout)["secret"] == "ac_code" and auth.consents[0]["scope"] == "files.read"
        first = auth.live_access_tokens()
        assert len(first) == 1

        async def calls() -> None:
            async with open_pincer(home) as p:
                result = await call(p, "ac_me", {})
                assert result.ok, result.error

        anyio.run(calls)
        bearer = sent(api)[1]["authorization"].removeprefix("Bearer ")
        assert bearer in auth.live_access_tokens() and [r["grant_type"] for r in auth.token_requests] == [
            "authorization_code", "refresh_token"]
        assert bearer not in login.stdout + login.stderr
