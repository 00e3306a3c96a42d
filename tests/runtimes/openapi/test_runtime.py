"""The OpenAPI runtime against a real local FastAPI app, through the whole call chain.

The app's own OpenAPI document is fetched by `pincer openapi add`; its API key sits in the secret
store, is injected as a header by pincer, and never shows in a result, an error or the audit log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from pincer.cli.main import app as cli
from pincer.config import parse_config
from pincer.core.effects import EffectKind
from pincer.core.values import CallRequest
from pincer.runtimes.openapi import ServiceStore
from pincer.secrets.store import SecretStore
from pincer.service import Pincer
from tests.runtimes.openapi.app import API_KEY, app
from tests.runtimes.openapi.chain import serve_app

pytestmark = pytest.mark.anyio

KEY = bytes(range(32))
START_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 10.0


@pytest.fixture
def api_url() -> Iterator[str]:
    """The FastAPI app served by uvicorn on 127.0.0.1 and a free port, in a thread."""
    with serve_app(app) as url:
        yield url


async def add_service(home: Path, api_url: str, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict:
    """`pincer openapi add` as a user runs it (in a worker thread: the CLI runs its own event loop)."""
    monkeypatch.setenv("PINCER_HOME", str(home))
    monkeypatch.setenv("PINCER_SECRET_KEY", KEY.hex())
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    if not config.exists():  # the app is plain http on loopback: what the operator must allow
        config.write_text("[network]\nallow_private = true\n")
    args = ["openapi", "add", "inv", "--spec", f"{api_url}/openapi.json", "--base-url", api_url, *extra, "--json"]
    with anyio.fail_after(CALL_TIMEOUT_S):
        result = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, args))
    assert result.exit_code == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def open_pincer(home: Path, grants: str = '[[grants]]\ntool = "inv_*"\ndefault = "allow"\n'):
    # The app is on loopback over plain http: only an operator's allow_private lets that through.
    config = parse_config(grants + "[network]\nallow_private = true\n", home=home)
    return Pincer.open(home, config=config, secret_key=KEY, builtins=False)


async def call(p: Pincer, tool: str, args: dict):
    with anyio.fail_after(CALL_TIMEOUT_S):
        return await p.call(CallRequest(tool=tool, args=args, caller="test"))


async def test_operations_become_tools_and_calls_carry_the_injected_key(
    tmp_path: Path, api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    added = await add_service(home, api_url, monkeypatch, "--auth-secret", "inv_key", "--auth", "header:X-Api-Key")
    assert set(added["tools"]) == {"inv_getItem", "inv_createItem", "inv_whoami", "inv_search"}
    with SecretStore.open(home, key=KEY) as store:
        store.set("inv_key", API_KEY)
    async with open_pincer(home) as p:
        spec = p.registry.get("inv_getItem")
        assert spec.effects == {EffectKind.NETWORK, EffectKind.USE_SECRET} and not spec.side_effecting
        assert p.registry.get("inv_createItem").side_effecting
        # The header parameter the API declares for its key is injected, never an argument.
        assert set(spec.input_schema["properties"]) == {"item_id", "verbose"}
        got = await call(p, "inv_getItem", {"item_id": 1, "verbose": True})
        assert got.ok, got.error
        assert got.output == {"id": 1, "name": "hammer", "price": 9.5, "tags": ["tools"], "verbose": True}
        created = await call(p, "inv_createItem", {"body": {"name": "saw", "price": 20, "tags": ["tools", "new"]}})
        assert created.ok and created.output["id"] == 2 and created.usage.extra["http_status"] == 201
        found = await call(p, "inv_search", {"tag": ["tools", "new"]})
        assert found.ok and found.output == {"ids": [2]}
        missing = await call(p, "inv_getItem", {"item_id": 99})
        assert not missing.ok and "HTTP 404" in missing.error["message"] and "no item 99" in missing.error["message"]
        invalid = await call(p, "inv_createItem", {"body": {"name": "x"}})
        assert not invalid.ok and invalid.error["code"] == "invalid_arguments"
        # The API echoes the key: the leak scan takes it out of the result.
        leaked = await call(p, "inv_whoami", {})
        assert leaked.ok and API_KEY not in json.dumps(leaked.output) and leaked.usage.redactions >= 1
    for db_file in home.glob("pincer.db*"):
        assert API_KEY.encode() not in db_file.read_bytes()
    assert API_KEY not in (home / "openapi" / "services.json").read_text()


async def test_without_the_secret_or_outside_the_allowlist_nothing_is_sent(
    tmp_path: Path, api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    await add_service(home, api_url, monkeypatch, "--auth-secret", "inv_key", "--auth", "header:X-Api-Key")
    async with open_pincer(home) as p:
        result = await call(p, "inv_whoami", {})
        assert not result.ok and result.error["code"] == "secret_error" and "inv_key" in result.error["message"]
    # A grant naming other hosts narrows the service's own allowlist.
    async with open_pincer(home, grants='[[grants]]\ntool = "inv_*"\ndefault = "allow"\nhosts = ["api.example.com"]\n') as p:
        result = await call(p, "inv_getItem", {"item_id": 1})
        assert not result.ok and result.error["code"] == "egress_denied"
    # Without the operator's allow_private, loopback is refused before anything is sent.
    config = parse_config('[[grants]]\ntool = "inv_*"\ndefault = "allow"\n', home=home)
    async with Pincer.open(home, config=config, secret_key=KEY, builtins=False) as p:
        result = await call(p, "inv_getItem", {"item_id": 1})
        assert not result.ok and result.error["code"] == "egress_denied"


def test_openapi_add_refuses_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINCER_HOME", str(tmp_path))
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {}}}}))
    runner = CliRunner()
    cases = [
        (["--spec", str(spec)], "names no server"),
        (["--spec", str(spec), "--base-url", "https://a.example", "--auth", "bearer"], "go together"),
        (["--spec", str(spec), "--base-url", "https://a.example", "--auth-secret", "k", "--auth", "cookie:x"],
         "is not bearer"),
        (["--spec", "http://example.com/openapi.json"], "is not https"),
        (["--spec", str(tmp_path / "missing.yaml")], "does not exist"),
    ]
    for args, message in cases:
        result = runner.invoke(cli, ["openapi", "add", "svc", *args])
        assert result.exit_code in (1, 2) and message in " ".join(result.stderr.split()), (args, result.stderr)
    assert ServiceStore(tmp_path).load() == []
    result = runner.invoke(cli, ["openapi", "add", "svc", "--spec", str(spec), "--base-url", "https://a.example/v1"])
    assert result.exit_code == 0
    assert [s.name for s in ServiceStore(tmp_path).load()] == ["svc"]


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("http://127.0.0.1:9/v1", "[network] allow_private = true"),
        ("https://10.0.0.7/v1", "[network] allow_private = true"),
        ("https://169.254.169.254/", "never reachable"),
        ("http://example.com/v1", "https"),
    ],
)
def test_openapi_add_refuses_a_base_url_every_call_would_be_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str, message: str
) -> None:
    """Newcomer item 4. Failed on main before the fix: `openapi add` accepted http://127.0.0.1
    and then every call failed with "plain http is allowed only to loopback in tests"."""
    monkeypatch.setenv("PINCER_HOME", str(tmp_path))
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {}}}}))
    runner = CliRunner()
    refused = runner.invoke(cli, ["openapi", "add", "svc", "--spec", str(spec), "--base-url", base])
    assert refused.exit_code == 2, refused.stderr
    assert "would all be refused" in refused.stderr and message in " ".join(refused.stderr.split())
    assert ServiceStore(tmp_path).load() == []
    forced = runner.invoke(cli, ["openapi", "add", "svc", "--spec", str(spec), "--base-url", base, "--force"])
    assert forced.exit_code == 0, forced.stderr
    assert [s.name for s in ServiceStore(tmp_path).load()] == ["svc"]
