"""Each person's own credentials (issue 41, item 3): a secret named in ``[secrets] per_person`` is
read for the person a call acts for, host-side, on every path; a call of no person is refused it
before anyone is asked; a removed person's values are gone. Against local HTTP stand-ins that
record the Authorization header each request carried.

Attack first: with one stored token (the only kind there was), every person's call carried it:
person B's call got person A's token."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.values import CallRequest
from pincer.policy.roles import parse_roles
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.localservers import LocalServer, serve

pytestmark = pytest.mark.anyio
CALL_TIMEOUT_S = 60.0
GINA_TOKEN = "gina-own-token-7f3a9c2e41d8b6a5"
BO_TOKEN = "bo-own-token-0c6e2b8d97f4a13e"
SHARED_TOKEN = "shared-token-5d1f8a3c7e9b2046"
ALL_TOKENS = (GINA_TOKEN, BO_TOKEN, SHARED_TOKEN)


def _config(server: LocalServer, *, mode: str = "allow") -> str:
    return f"""
[network]
allow_private = true

[secrets]
per_person = ["api_key"]

[[grants]]
tool = "http"
effects = {{ network = "{mode}", use_secret = "{mode}" }}
hosts = ["127.0.0.1:{server.port}"]

[[credentials]]
secret = "api_key"
location = "bearer"
host_patterns = ["127.0.0.1"]
"""


@pytest.fixture
def stand_in() -> Iterator[LocalServer]:
    with serve() as server:
        yield server


async def _person(live: LiveGateway, name: str, value: str | None) -> str:
    """A person (an approver of everything, so no role stands in the way) with their own value of
    ``api_key`` when ``value`` is given; returns their personal access token."""
    await live.pincer.people.add(name, roles=parse_roles(["approver"]), email=None, by="cli:test", now=time.time())
    if value is not None:
        live.pincer.secrets.set_for(name, "api_key", value)
    return (await live.pincer.people.new_token(name, now=time.time())).value


@pytest.fixture
async def team(pincer_home: Path, stand_in: LocalServer) -> AsyncIterator[tuple[LiveGateway, dict[str, str]]]:
    async with live_gateway(pincer_home, config=_config(stand_in), builtins=True) as live:
        live.pincer.secrets.set("api_key", SHARED_TOKEN)  # a shared value, never to stand in for a person's
        tokens = {"gina": await _person(live, "gina", GINA_TOKEN), "bo": await _person(live, "bo", BO_TOKEN)}
        yield live, tokens


async def _rest_call(live: LiveGateway, token: str, url: str) -> tuple[int, dict[str, Any]]:
    async with live.http(headers={"Authorization": f"Bearer {token}"}) as http:
        answer = await http.post("/api/v1/tools/http/call", json={"args": {"url": url}})
    return answer.status_code, answer.json()


def _carried(server: LocalServer) -> list[str]:
    return [r.headers.get("Authorization", "") for r in server.requests]


async def _nowhere(live: LiveGateway) -> None:
    """Neither the audit log nor any approval holds a token, in any record."""
    records = json.dumps([r.to_dict() for r in await live.pincer.audit.records()], default=str)
    approvals = json.dumps([a.to_dict() for a in await live.pincer.approvals.list(status=None)], default=str)
    for value in ALL_TOKENS:
        assert value not in records and value not in approvals


async def test_over_rest_each_persons_call_carries_their_own_token_never_another_persons(
    team: tuple[LiveGateway, dict[str, str]], stand_in: LocalServer
) -> None:
    live, tokens = team
    status, bo = await _rest_call(live, tokens["bo"], stand_in.url("/echo"))
    assert status == 200, bo
    assert _carried(stand_in) == [f"Bearer {BO_TOKEN}"]  # before: "Bearer shared-..." (one token for all)
    status, gina = await _rest_call(live, tokens["gina"], stand_in.url("/echo"))
    assert status == 200, gina
    assert _carried(stand_in) == [f"Bearer {BO_TOKEN}", f"Bearer {GINA_TOKEN}"]
    # The stand-in echoed the header back: the output shows neither person's token.
    for answer in (bo, gina):
        assert not any(value in json.dumps(answer) for value in ALL_TOKENS), answer
    assert "[REDACTED" in json.dumps(bo)
    (first, second) = [r for r in await live.pincer.audit.records(tool="http") if r.kind == "call"]
    assert (first.person, second.person) == ("bo", "gina")
    await _nowhere(live)


async def test_over_mcp_a_persons_call_carries_their_own_token(
    team: tuple[LiveGateway, dict[str, str]], stand_in: LocalServer
) -> None:
    live, tokens = team
    async with live.mcp(token=tokens["gina"]) as client:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await client.call_tool("http", {"url": stand_in.url("/echo")})
    assert not result.is_error, result
    assert _carried(stand_in) == [f"Bearer {GINA_TOKEN}"]
    assert not any(value in result.model_dump_json() for value in ALL_TOKENS)
    await _nowhere(live)


async def test_a_call_of_no_person_is_refused_a_per_person_credential_before_anyone_is_asked(
    pincer_home: Path, stand_in: LocalServer
) -> None:
    """The gateway's own token acts for no person: no fallback to the shared value, no approval
    asked (the grant asks), nothing sent; the error names what to do."""
    async with live_gateway(pincer_home, config=_config(stand_in, mode="ask"), builtins=True) as live:
        live.pincer.secrets.set("api_key", SHARED_TOKEN)
        with anyio.fail_after(CALL_TIMEOUT_S):
            status, answer = await _rest_call(live, live.token, stand_in.url("/echo"))
        assert status >= 400 and not answer["ok"], answer
        error = answer["error"]
        assert "per person" in error["message"] and "acts for no person" in error["message"], error
        assert "pincer people token" in error["hint"], error
        assert stand_in.requests == [] and await live.pincer.approvals.list() == []
        await _nowhere(live)


async def test_a_person_without_their_own_value_is_refused_with_the_command_that_connects_it(
    pincer_home: Path, stand_in: LocalServer
) -> None:
    async with live_gateway(pincer_home, config=_config(stand_in, mode="ask"), builtins=True) as live:
        live.pincer.secrets.set("api_key", SHARED_TOKEN)
        live.pincer.secrets.set_for("gina", "api_key", GINA_TOKEN)
        wes = await _person(live, "wes", None)
        with anyio.fail_after(CALL_TIMEOUT_S):
            status, answer = await _rest_call(live, wes, stand_in.url("/echo"))
        assert status >= 400 and not answer["ok"], answer
        assert "wes has no value of the per-person secret 'api_key'" in answer["error"]["message"], answer
        assert "pincer secrets set api_key --person wes" in answer["error"]["hint"], answer
        assert stand_in.requests == [] and await live.pincer.approvals.list() == []
        await _nowhere(live)


async def test_an_agent_run_acts_for_the_person_who_started_it_and_a_trigger_run_for_no_one(
    pincer_home: Path, stand_in: LocalServer
) -> None:
    """A run started with gina's token calls http with gina's token; the same run started by a
    trigger (no person) is refused the credential and sends nothing."""
    from pincer.demo.model_server import ScriptedCall, Turn, serve_models
    from pincer.llm.run import RunRequest
    from tests.gateway.test_runs import RUN_TIMEOUT_S, _events

    call = ScriptedCall(name="http", arguments={"url": stand_in.url("/echo")})
    script = [Turn(text="Calling. ", calls=(call,)), Turn(text="Done."),
              Turn(text="Calling. ", calls=(call,)), Turn(text="Done.")]  # fmt: skip
    with serve_models(script) as models:
        config = _config(stand_in) + f"""
[llm]
model = "scripted-model"
base_url = "{models.openai_url}"

[agent]
taint = "off"
"""
        async with live_gateway(pincer_home, config=config, builtins=True) as live:
            gina = await _person(live, "gina", GINA_TOKEN)
            async with live.http(headers={"Authorization": f"Bearer {gina}"}) as http:
                started = await http.post("/api/v1/runs", json={"message": "call it"})
                assert started.status_code == 202, started.text
                with anyio.fail_after(RUN_TIMEOUT_S):
                    assert (await _events(live, started.json()["run_id"]))[-1]["status"] == "done"
            assert _carried(stand_in) == [f"Bearer {GINA_TOKEN}"]
            with anyio.fail_after(RUN_TIMEOUT_S):
                run = await live.pincer.agent.run(RunRequest(message="call it", trigger="schedule"))
            assert _carried(stand_in) == [f"Bearer {GINA_TOKEN}"], "a run of no person sent a request"
            refused = [r for r in await live.pincer.audit.records(tool="http") if r.kind == "call" and r.run_id == run.id]
            assert refused and refused[0].outcome != "ok" and "acts for no person" in (refused[0].error or ""), refused
            await _nowhere(live)


async def test_the_github_built_in_injects_the_calling_persons_own_token(tmp_path: Path) -> None:
    from tests.builtins import fakegithub
    from tests.builtins.conftest import github_config, pincer_on

    with fakegithub.serve() as fake:
        config = github_config(fake, extra='\n[secrets]\nper_person = ["github_token"]\n')
        async with pincer_on(tmp_path, config, secrets={"github_token": SHARED_TOKEN}) as pincer:
            pincer.secrets.set_for("gina", "github_token", GINA_TOKEN)
            pincer.secrets.set_for("bo", "github_token", BO_TOKEN)
            args = {"action": "get_repo", "owner": "octocat", "repo": "hello-world"}
            for person in ("bo", "gina"):
                await pincer.call(CallRequest(tool="github", args=args, person=person))
            nobody = await pincer.call(CallRequest(tool="github", args=args))
    assert [r.headers.get("Authorization") for r in fake.requests] == [f"Bearer {BO_TOKEN}", f"Bearer {GINA_TOKEN}"]
    assert not nobody.ok and "acts for no person" in nobody.error["message"]
    assert not any(value in json.dumps(nobody.to_dict()) for value in ALL_TOKENS)


def test_a_persons_value_is_sealed_to_them_and_the_leak_scanner_knows_it(tmp_path: Path) -> None:
    """A row of gina's copied onto bo (or onto the shared name) does not open; every value is
    among the scanner's; deleting a person deletes every value of theirs."""
    import sqlite3

    from pincer.core.errors import SecretError
    from pincer.secrets.store import SECRETS_DB_NAME, SecretStore

    with SecretStore.open(tmp_path, key=b"s" * 32) as store:
        store.set_for("gina", "api_key", GINA_TOKEN)
        store.set_for("gina", "other_key", BO_TOKEN)
        assert store.find_for("gina", "api_key") == GINA_TOKEN and store.find_for("bo", "api_key") is None
        assert store.find("api_key") is None  # a person's value is no shared one
        assert set(store.values()) == {GINA_TOKEN, BO_TOKEN}
    assert GINA_TOKEN.encode() not in (tmp_path / SECRETS_DB_NAME).read_bytes()
    with sqlite3.connect(tmp_path / SECRETS_DB_NAME) as db:
        db.execute("INSERT INTO person_secrets SELECT 'bo', name, nonce, ciphertext, created_at, updated_at "
                   "FROM person_secrets WHERE person = 'gina' AND name = 'api_key'")  # fmt: skip
        db.execute("INSERT INTO secrets SELECT name, nonce, ciphertext, created_at, updated_at "
                   "FROM person_secrets WHERE person = 'gina' AND name = 'api_key'")  # fmt: skip
    with SecretStore.open(tmp_path, key=b"s" * 32) as store:
        for read in (lambda: store.find_for("bo", "api_key"), lambda: store.find("api_key")):
            with pytest.raises(SecretError) as caught:
                read()
            assert GINA_TOKEN not in str(caught.value) + (caught.value.hint or "")
        assert store.delete_for("gina") == 2 and store.person_names("gina") == []


def test_the_cli_sets_a_persons_own_value_lists_it_as_theirs_and_forgets_it_with_the_person(pincer_home: Path) -> None:
    from pincer.secrets.store import SecretStore
    from tests.gateway.ui.conftest import pincer_cli

    (pincer_home / "config.toml").write_text('[secrets]\nper_person = ["api_key"]\n')
    assert pincer_cli(pincer_home, "people", "add", "gina", "--role", "viewer").returncode == 0
    shared = pincer_cli(pincer_home, "secrets", "set", "other_key", "--person", "gina", stdin=BO_TOKEN)
    assert shared.returncode != 0 and "not per person" in shared.stderr and "[secrets] per_person" in shared.stderr
    nobody = pincer_cli(pincer_home, "secrets", "set", "api_key", "--person", "zed", stdin=BO_TOKEN)
    assert nobody.returncode != 0 and "no person named 'zed'" in nobody.stderr and "pincer people add zed" in nobody.stderr
    done = pincer_cli(pincer_home, "secrets", "set", "api_key", "--person", "gina", "--json", stdin=GINA_TOKEN)
    assert done.returncode == 0, done.stderr
    assert pincer_cli(pincer_home, "secrets", "set", "github_token", stdin=SHARED_TOKEN).returncode == 0
    listed = pincer_cli(pincer_home, "secrets", "list", "--json")
    rows = [(r["name"], r["kind"], r["person"]) for r in json.loads(listed.stdout)]
    assert rows == [("api_key", "per-person", "gina"), ("github_token", "shared", None)]
    removed = pincer_cli(pincer_home, "people", "remove", "gina", "--json")
    assert removed.returncode == 0 and json.loads(removed.stdout)["credentials"] == 1, removed.stderr
    outputs = "".join(p.stdout + p.stderr for p in (shared, nobody, done, listed, removed))
    assert not any(value in outputs for value in ALL_TOKENS)
    with SecretStore.open(pincer_home) as store:
        assert store.person_names() == [] and store.find("github_token") == SHARED_TOKEN


async def test_an_mcp_server_never_gets_the_shared_value_of_a_per_person_secret(tmp_path: Path) -> None:
    """An MCP server's ``${secret:NAME}`` of a per-person name is resolved per person
    (tests/people/test_person_mcp_instances.py): the shared value reaches no process, neither the
    one that lists the tools (started without that variable) nor a person without their own."""
    from pincer.config import parse_config
    from pincer.runtimes.mcp import ServerStore
    from pincer.secrets.store import SecretStore
    from pincer.service import Pincer
    from tests.runtimes.mcp.conftest import faulty_config

    ServerStore(tmp_path).add(faulty_config("f", "--secret-env", "UPSTREAM_TOKEN", env={"UPSTREAM_TOKEN": "${secret:upstream}"}))
    with SecretStore.open(tmp_path, key=b"m" * 32) as store:
        store.set("upstream", SHARED_TOKEN)
    config = parse_config('[secrets]\nper_person = ["upstream"]\n[[grants]]\ntool = "f_*"\ndefault = "allow"\n', home=tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=b"m" * 32, builtins=False) as pincer:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await pincer.call(CallRequest(tool="f_env", args={}, person="gina"))
        assert pincer.mcp is not None
        listing = pincer.mcp.connections["f"]
        people = pincer.mcp.person_instances("f")
    assert not result.ok and SHARED_TOKEN not in json.dumps(result.to_dict())
    assert "gina has no value of the per-person secret 'upstream'" in (result.error or {}).get("message", ""), result
    assert "UPSTREAM_TOKEN" not in listing.config.env and people is not None and people.people == []


def test_auth_setup_connects_a_persons_own_github_token_checked_as_anyones(tmp_path: Path) -> None:
    """``pincer auth setup github --person gina`` checks gina's token against GitHub's API (the
    local stand-in) and keeps it as hers; ``auth status`` says the token is per person and whose."""
    from pincer.secrets.store import SecretStore
    from tests.builtins import fakegithub
    from tests.gateway.ui.conftest import pincer_cli

    home = tmp_path / "home"
    with fakegithub.serve() as fake:
        home.mkdir()
        (home / "config.toml").write_text(f'[builtins.github]\nenabled = true\nbase_url = "{fake.base_url}"\n'
                                          '\n[secrets]\nper_person = ["github_token"]\n')  # fmt: skip
        assert pincer_cli(home, "people", "add", "gina", "--role", "viewer").returncode == 0
        done = pincer_cli(home, "auth", "setup", "github", "--person", "gina", "--json", stdin=GINA_TOKEN)
        assert done.returncode == 0, done.stderr
        assert [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {GINA_TOKEN}"]
        oauth = pincer_cli(home, "auth", "setup", "google", "--person", "gina", "--no-browser")
        status = {r["tool"]: r for r in json.loads(pincer_cli(home, "auth", "status", "--json").stdout)}
    assert json.loads(done.stdout)["person"] == "gina"
    # google's login is not per person here: a person's own login of it is refused, naming the key.
    assert oauth.returncode != 0 and "not per person" in oauth.stderr and "[secrets] per_person" in oauth.stderr, oauth.stderr
    assert (status["github"]["kind"], status["github"]["people"], status["github"]["stored"]) == ("per-person", ["gina"], True)
    assert status["web_search"]["kind"] == "shared"
    assert GINA_TOKEN not in done.stdout + done.stderr + oauth.stdout + oauth.stderr
    with SecretStore.open(home) as store:
        assert store.find_for("gina", "github_token") == GINA_TOKEN and store.find("github_token") is None


async def test_an_openapi_service_sends_the_calling_persons_own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local FastAPI app that accepts one key (gina's): gina's call passes, bo's is refused by
    the app (his own key went), a call of no one is refused before anything is sent."""
    from pincer.config import parse_config
    from pincer.service import Pincer
    from tests.runtimes.openapi.app import API_KEY, app
    from tests.runtimes.openapi.chain import serve_app
    from tests.runtimes.openapi.test_runtime import KEY, add_service

    home = tmp_path / "home"
    with serve_app(app) as api_url:
        await add_service(home, api_url, monkeypatch, "--auth-secret", "inv_key", "--auth", "header:X-Api-Key")
        config = parse_config('[secrets]\nper_person = ["inv_key"]\n[network]\nallow_private = true\n'
                              '[[grants]]\ntool = "inv_*"\ndefault = "allow"\n', home=home)  # fmt: skip
        async with Pincer.open(home, config=config, secret_key=KEY, builtins=False) as pincer:
            pincer.secrets.set("inv_key", API_KEY)  # shared: must not stand in for anyone
            pincer.secrets.set_for("gina", "inv_key", API_KEY)
            pincer.secrets.set_for("bo", "inv_key", BO_TOKEN)
            with anyio.fail_after(CALL_TIMEOUT_S):
                gina = await pincer.call(CallRequest(tool="inv_whoami", args={}, person="gina"))
                bo = await pincer.call(CallRequest(tool="inv_whoami", args={}, person="bo"))
                nobody = await pincer.call(CallRequest(tool="inv_whoami", args={}))
            records = json.dumps([r.to_dict() for r in await pincer.audit.records()], default=str)
    assert gina.ok and API_KEY not in json.dumps(gina.output) and gina.usage.redactions >= 1
    assert not bo.ok and "401" in bo.error["message"] and BO_TOKEN not in json.dumps(bo.to_dict()), bo.error
    assert not nobody.ok and "acts for no person" in nobody.error["message"], nobody.error
    assert API_KEY not in records and BO_TOKEN not in records


async def test_an_openapi_security_scheme_per_person_never_falls_back_to_a_shared_or_service_token(tmp_path: Path) -> None:
    """A document's apiKey scheme sends the calling person's own key; an OAuth client-credentials
    scheme declared per person is never filled with a token of the service's own client (before
    the fix, a person with no token of theirs got one issued for the shared client)."""
    from tests.runtimes.openapi import ccserver
    from tests.runtimes.openapi.chain import add_document, open_pincer, set_secrets
    from tests.runtimes.openapi.test_security import DOCUMENT, oauth_document, sent

    home = tmp_path / "home"
    with serve() as echo, ccserver.serve() as tokens:
        add_document(home, "sec", DOCUMENT, echo.url("/echo"))
        schemes = {"cc": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": f"{tokens.base_url}/token",
                                                                           "scopes": {"read": "r"}}}}}  # fmt: skip
        add_document(home, "oa", oauth_document(schemes, [{"cc": ["read"]}]), echo.url("/echo"))
        set_secrets(home, {"sec_api_key": SHARED_TOKEN, "oa_cc_client_id": ccserver.CLIENT_ID,
                           "oa_cc_client_secret": ccserver.CLIENT_SECRET})  # fmt: skip
        async with open_pincer(home, extra='[secrets]\nper_person = ["sec_api_key", "oa_cc"]\n') as pincer:
            pincer.secrets.set_for("gina", "sec_api_key", GINA_TOKEN)

            async def call(tool: str, person: str | None) -> Any:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    return await pincer.call(CallRequest(tool=tool, args={}, person=person))

            gina = await call("sec_default", "gina")
            assert gina.ok and sent(echo)[1] == {"x-api-key": GINA_TOKEN}, gina.error
            nobody = await call("sec_default", None)
            bo = await call("sec_default", "bo")
            assert not nobody.ok and "acts for no person" in nobody.error["message"], nobody.error
            assert not bo.ok and "pincer secrets set sec_api_key --person bo" in bo.error["hint"], bo.error
            oauth = await call("oa_me", "gina")
            assert not oauth.ok and oauth.error["code"] == "secret_error", oauth.error
        assert len(echo.requests) == 1 and tokens.issued == []
