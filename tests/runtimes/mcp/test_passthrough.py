"""Published MCP servers behind a real ``pincer serve``, called with the official SDK client in
both protocol eras: what each server offers arrives as it sent it (issue 36, "MCP through the
gateway").

Servers, from npm and PyPI as users install them: ``@modelcontextprotocol/server-everything``
(annotations, resources, templates, prompts), ``@modelcontextprotocol/server-basic-vanillajs`` (an
MCP App: a tool with ``_meta.ui`` and its ``ui://`` page), ``mcp-server-fetch`` (a prompt that
fetches a page), ``mcp-server-git`` and ``mcp-server-time`` (annotated tools), and
``@playwright/mcp`` on Debian's chromium (required arguments with defaults). Each is also asked
directly with the same SDK client, and what the gateway serves is compared with that.

Failed before: annotations were replaced by ones derived from effects (``destructiveHint``,
``idempotentHint``, ``openWorldHint`` and the annotations' ``title`` lost: ``everything_echo``
arrived as ``{"readOnlyHint": true}``); ``resources/list`` listed nothing of the servers and
``resources/read`` of the App's page said "Resource not found"; the tool's ``_meta.ui`` was
stripped; ``browser_console_messages`` without ``level`` was refused ("'level' is a required
property").
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from pincer.builtins.browser.launcher import CHROMIUM, sandbox_plan
from pincer.core.effects import EffectKind
from pincer.runtimes.mcp import ServerConfig, ServerStore
from pincer.runtimes.mcp.config import tool_name
from tests.gateway.conftest import PINCER_BIN, pincer_serve
from tests.localservers import PAGE_TITLE, serve
from tests.runtimes.mcp.conftest import APPS_SERVER_JS, EVERYTHING_JS, PLAYWRIGHT_MCP_JS, published_ready

CALL_TIMEOUT_S = 60.0  # a call that may start a server (node, chromium) on a busy machine
CLI_TIMEOUT_S = 60.0
ERAS = ("auto", "legacy")  # 2026-07-28 (discovered), and the 2025-11-25 initialize handshake
BIN = Path(sys.executable).parent
APP_MIME = "text/html;profile=mcp-app"
# Everything these servers do here runs without a person: the grants allow every effect.
GRANTS = '[[grants]]\ntool = "*"\ndefault = "allow"\n'


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _node() -> str:
    node = shutil.which("node")
    assert node is not None, "node is not on PATH (make mcp-deps needs it too)"
    return node


def _servers(tmp: Path) -> list[ServerConfig]:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=CLI_TIMEOUT_S)
    node = _node()
    return [
        ServerConfig(name="everything", transport="stdio", command=node, args=(str(EVERYTHING_JS), "stdio")),
        ServerConfig(name="apps", transport="stdio", command=node, args=(str(APPS_SERVER_JS), "--stdio")),
        # Its prompt fetches a page: the entry says so, and the grant above covers it.
        ServerConfig(name="fetch", transport="stdio", command=str(BIN / "mcp-server-fetch"),
                     args=("--allow-private-ips",), effects=frozenset({EffectKind.NETWORK})),  # the page is local
        ServerConfig(name="git", transport="stdio", command=str(BIN / "mcp-server-git"), args=("--repository", str(repo))),
        ServerConfig(name="time", transport="stdio", command=str(BIN / "mcp-server-time"), args=("--local-timezone", "UTC")),
    ]  # fmt: skip


def _params(config: ServerConfig) -> StdioServerParameters:
    return StdioServerParameters(command=config.command or "", args=list(config.args), cwd=config.cwd)


async def _offered(client: Client) -> dict[str, Any]:
    """Everything a client can list, as plain JSON."""
    seen: dict[str, Any] = {"tools": [_dump(t) for t in (await client.list_tools()).tools]}
    seen["resources"] = [_dump(r) for r in (await client.list_resources()).resources]
    seen["templates"] = [_dump(t) for t in (await client.list_resource_templates()).resource_templates]
    seen["prompts"] = [_dump(p) for p in (await client.list_prompts()).prompts]
    return seen


async def _direct(config: ServerConfig, page_url: str) -> dict[str, Any]:
    """What the server itself sends to the same SDK client: its lists, and the reads the
    gateway is asked for below."""
    async with Client(_params(config), mode="auto") as client:
        caps = client.server_capabilities
        seen: dict[str, Any] = {"tools": [_dump(t) for t in (await client.list_tools()).tools]}
        seen["resources"] = [_dump(r) for r in (await client.list_resources()).resources] if caps.resources else []
        seen["templates"] = (
            [_dump(t) for t in (await client.list_resource_templates()).resource_templates] if caps.resources else []
        )
        seen["prompts"] = [_dump(p) for p in (await client.list_prompts()).prompts] if caps.prompts else []
        if config.name == "everything":
            seen["doc"] = _dump(await client.read_resource("demo://resource/static/document/architecture.md"))
            seen["blob"] = _dump(await client.read_resource("demo://resource/dynamic/blob/7"))
            seen["prompt"] = _dump(await client.get_prompt("args-prompt", {"city": "Paris", "state": "TX"}))
        if config.name == "apps":
            seen["page"] = _dump(await client.read_resource("ui://get-time/mcp-app.html"))
        if config.name == "fetch":
            seen["fetched"] = _dump(await client.get_prompt("fetch", {"url": page_url}))
        return seen


async def _through_gateway(info: Mapping[str, Any], token: str, mode: str, page_url: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        async with Client(streamable_http_client(info["mcp_url"], http_client=http), mode=mode) as client:
            with anyio.fail_after(CALL_TIMEOUT_S * 3):
                seen = await _offered(client)
                seen["era"] = client.protocol_version
                seen["doc"] = _dump(await client.read_resource("demo://everything/resource/static/document/architecture.md"))
                seen["blob"] = _dump(await client.read_resource("demo://everything/resource/dynamic/blob/7"))
                seen["prompt"] = _dump(
                    await client.get_prompt("everything_args_prompt", {"city": "Paris", "state": "TX"})
                )
                seen["page"] = _dump(await client.read_resource("ui://apps/get-time/mcp-app.html"))
                # The App's own call back into its server, as a host makes it on the App's behalf.
                seen["app_call"] = _dump(await client.call_tool("apps_get_time", {}))
                seen["fetched"] = _dump(await client.get_prompt("fetch_fetch", {"url": page_url}))
    return seen


def _served_uri(server: str, uri: str) -> str:
    scheme, _, rest = uri.partition("://")
    return f"{scheme}://{server}/{rest}"


def _without_pincer_keys(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if not k.startswith("pincer/")}


def _check_lists(seen: dict[str, Any], direct: dict[str, dict[str, Any]]) -> None:
    tools = {tool["name"]: tool for tool in seen["tools"]}
    for server, offered in direct.items():
        for upstream in offered["tools"]:
            served = tools[tool_name(server, upstream["name"])]
            # The annotations exactly as the server sent them: nothing added, nothing removed.
            assert served.get("annotations") == upstream.get("annotations"), (server, upstream["name"])
            assert served.get("title") == upstream.get("title")
            assert served.get("outputSchema") == upstream.get("outputSchema")
            assert served["inputSchema"] == upstream["inputSchema"]
            meta = dict(upstream.get("_meta") or {})
            if "ui" in meta:  # an MCP App's page, at the URI the gateway serves it under
                meta["ui"] = {**meta["ui"], "resourceUri": _served_uri(server, meta["ui"]["resourceUri"])}
                meta["ui/resourceUri"] = meta["ui"]["resourceUri"]
            assert _without_pincer_keys(served.get("_meta")) == meta, (server, upstream["name"])
            assert isinstance(served["_meta"]["pincer/effects"], list)  # pincer's decision, beside them
        for kind, key in (("resources", "uri"), ("templates", "uriTemplate")):
            expected = [{**item, key: _served_uri(server, item[key])} for item in offered[kind]]
            got = [item for item in seen[kind] if item[key].split("://", 1)[1].startswith(f"{server}/")]
            assert got == expected, (server, kind)
        expected_prompts = [{**p, "name": tool_name(server, p["name"])} for p in offered["prompts"]]
        assert [p for p in seen["prompts"] if p["name"].startswith(f"{server}_")] == expected_prompts


def _check_reads(seen: dict[str, Any], direct: dict[str, dict[str, Any]]) -> None:
    everything, apps = direct["everything"], direct["apps"]
    (doc,) = seen["doc"]["contents"]
    assert doc == {**everything["doc"]["contents"][0], "uri": "demo://everything/resource/static/document/architecture.md"}
    # The blob says when the server made it ("... created at 11:14:28 PM"): all but that time.
    blob = dict(seen["blob"]["contents"][0])
    upstream_blob = dict(everything["blob"]["contents"][0])
    made = base64.b64decode(blob.pop("blob")).decode()
    assert made.startswith("Resource 7: This is a base64 blob created at ")
    assert base64.b64decode(upstream_blob.pop("blob")).decode().split(" at ")[0] == made.split(" at ")[0]
    assert blob == {**upstream_blob, "uri": "demo://everything/resource/dynamic/blob/7"}
    assert isinstance(seen["doc"]["_meta"]["pincer/auditId"], int)
    assert seen["prompt"]["messages"] == everything["prompt"]["messages"]
    assert seen["prompt"].get("description") == everything["prompt"].get("description")
    # The MCP App's page: the upstream's HTML, whole, with its own _meta (CSP and the like).
    (page,) = seen["page"]["contents"]
    (upstream_page,) = apps["page"]["contents"]
    assert page == {**upstream_page, "uri": "ui://apps/get-time/mcp-app.html"}
    assert page["mimeType"] == APP_MIME and len(page["text"]) > 100_000  # over [output] max_bytes
    # The App's call back reached its server through the chain and came back with its answer.
    call = seen["app_call"]
    assert not call.get("isError") and isinstance(call["structuredContent"]["time"], str)
    assert isinstance(call["_meta"]["pincer/auditId"], int)
    # mcp-server-fetch's prompt fetched the local page and made markdown of it.
    assert seen["fetched"]["messages"] == direct["fetch"]["fetched"]["messages"]
    assert "Hello from the page" in json.dumps(seen["fetched"]["messages"])


def test_published_servers_pass_through_whole_in_both_eras(pincer_home: Path, tmp_path: Path) -> None:
    published_ready()
    servers = _servers(tmp_path)
    ServerStore(pincer_home).add_many(servers)
    (pincer_home / "config.toml").write_text(GRANTS, encoding="utf-8")
    with serve() as site:
        page_url = site.url("/page")

        async def directly() -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}
            with anyio.fail_after(CALL_TIMEOUT_S * 3):
                for config in servers:
                    found[config.name] = await _direct(config, page_url)
            return found

        direct = anyio.run(directly)
        with pincer_serve(pincer_home) as gateway:
            token = _pincer(pincer_home, "token").stdout.strip()
            seen = {mode: anyio.run(_through_gateway, gateway.info, token, mode, page_url) for mode in ERAS}
        audit = json.loads(_pincer(pincer_home, "audit", "list", "--json", "--limit", "1000").stdout)

    assert seen["auto"]["era"] == "2026-07-28" and seen["legacy"]["era"] == "2025-11-25"
    for mode in ERAS:
        _check_lists(seen[mode], direct)
        _check_reads(seen[mode], direct)
    # One audit record per read, per era: no listing is recorded, no read twice.
    reads = [r for r in audit if r["tool"] == "everything_resources/read"]
    assert len(reads) == 2 * len(ERAS), [r["args"] for r in reads]
    assert {r["args"]["uri"] for r in reads} == {
        "demo://resource/static/document/architecture.md", "demo://resource/dynamic/blob/7"
    }  # fmt: skip
    assert all(r["outcome"] == "ok" and r["caller"] == "mcp" for r in reads)
    assert len([r for r in audit if r["tool"] == "apps_resources/read"]) == len(ERAS)
    assert len([r for r in audit if r["tool"] == "fetch_prompts/get"]) == len(ERAS)


def _playwright(tmp: Path) -> ServerConfig:
    sandbox = sandbox_plan()[0][0]
    args = [str(PLAYWRIGHT_MCP_JS), "--headless", "--isolated", "--executable-path", CHROMIUM,
            "--output-dir", str(tmp / "playwright-output")]  # fmt: skip
    if not sandbox:
        args.append("--no-sandbox")
    return ServerConfig(name="pw", transport="stdio", command=_node(), args=tuple(args), cwd=str(tmp), timeout_s=60.0)


@pytest.mark.parametrize("mode", ERAS)
def test_playwright_calls_with_defaulted_arguments_succeed(pincer_home: Path, tmp_path: Path, mode: str) -> None:
    """``@playwright/mcp`` declares ``level`` of browser_console_messages required with a default
    ("info"), as zod's ``.default()`` makes it; the call without it is sent with it."""
    published_ready()
    ServerStore(pincer_home).add(_playwright(tmp_path))
    (pincer_home / "config.toml").write_text(GRANTS + "[tools]\ntimeout_s = 90\n", encoding="utf-8")
    with serve() as site, pincer_serve(pincer_home) as gateway:
        token = _pincer(pincer_home, "token").stdout.strip()

        async def drive() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
                async with Client(streamable_http_client(gateway.info["mcp_url"], http_client=http), mode=mode) as client:
                    with anyio.fail_after(CALL_TIMEOUT_S * 3):
                        tools = {t.name: _dump(t) for t in (await client.list_tools()).tools}
                        seen["schema"] = tools["pw_browser_console_messages"]["inputSchema"]
                        seen["navigate"] = await client.call_tool("pw_browser_navigate", {"url": site.url("/page")})
                        seen["snapshot"] = await client.call_tool("pw_browser_snapshot", {})
                        seen["console"] = await client.call_tool("pw_browser_console_messages", {})
                        await client.call_tool("pw_browser_close", {})
            return seen

        seen = anyio.run(drive)
        audit = json.loads(_pincer(pincer_home, "audit", "list", "--json", "--tool", "pw_browser_console_messages").stdout)

    schema = seen["schema"]
    assert "level" in schema["required"] and schema["properties"]["level"]["default"] == "info"
    for key in ("navigate", "snapshot", "console"):
        assert not seen[key].is_error, (key, seen[key].content)
    assert PAGE_TITLE in seen["navigate"].content[0].text
    snapshot = seen["snapshot"].content[0].text
    assert 'heading "Hello from the page"' in snapshot and 'button "Press me"' in snapshot
    assert "Total messages" in seen["console"].content[0].text
    # The call was recorded (and sent) with the default it left out.
    (record,) = audit
    assert record["args"] == {"level": "info"} and record["outcome"] == "ok"
    assert any(request.path == "/page" for request in site.requests)
