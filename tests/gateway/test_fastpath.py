"""The direct JSON path for 2026-07-28 ``tools/call`` answers exactly what the SDK's path would,
and leaves to the SDK everything it is not sure about."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gateway.conftest import LiveGateway

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"


def _meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        **extra,
    }


def _headers(name: str = "say", **overrides: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    headers.update(overrides)
    return headers


def _call(name: str, arguments: dict[str, Any], meta: dict[str, Any], rpc_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }


def _sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_a_plain_call_is_answered_as_json_like_the_sdk_would(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        direct = await http.post("/mcp", headers=_headers(), json=_call("say", {"text": "fast"}, _meta()))
        # A progress token sends the same call down the SDK's streaming path.
        streamed = await http.post(
            "/mcp", headers=_headers(), json=_call("say", {"text": "fast"}, _meta(progressToken="p1"), 2)
        )
    assert direct.status_code == 200 and direct.headers["content-type"] == "application/json"
    fast = direct.json()["result"]
    sdk = (
        streamed.json()
        if streamed.headers["content-type"].startswith("application/json")
        else _sse_messages(streamed.text)[-1]
    )["result"]
    for result in (fast, sdk):
        result["_meta"].pop("pincer/auditId")
    assert fast == sdk
    assert fast["resultType"] == "complete" and fast["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "pincer"
    assert [r.caller for r in await gateway.pincer.audit.records()] == ["mcp", "mcp"]


async def test_a_call_asking_for_progress_is_streamed(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post(
            "/mcp", headers=_headers("report"), json=_call("report", {}, _meta(progressToken="tok"))
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = _sse_messages(response.text)
    assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [1, 2]
    assert messages[-1]["result"]["content"][0]["text"] == "reported"


@pytest.mark.parametrize(
    ("headers", "meta", "status", "code"),
    [
        ({"Mcp-Name": "other_tool"}, _meta(), 400, -32020),
        ({"Mcp-Method": "tools/list"}, _meta(), 400, -32020),
        (
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Name": "say"},
            {"io.modelcontextprotocol/protocolVersion": VERSION},
            400,
            -32602,
        ),
        (
            {"MCP-Protocol-Version": "2099-01-01"},
            {**_meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
            400,
            -32022,
        ),
    ],
    ids=["name-mismatch", "method-mismatch", "no-capabilities", "unknown-version"],
)
async def test_what_the_ladder_rejects_gets_the_sdks_answer(
    gateway: LiveGateway, headers: dict[str, str], meta: dict[str, Any], status: int, code: int
) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post("/mcp", headers=_headers(**headers), json=_call("say", {"text": "x"}, meta, 7))
    body = response.json()
    assert response.status_code == status and body["error"]["code"] == code and body["id"] == 7
    assert all(r.tool != "say" or r.outcome != "ok" for r in await gateway.pincer.audit.records())


async def test_sse_only_accept_header_is_refused_by_the_sdk(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post(
            "/mcp", headers=_headers(Accept="text/event-stream"), json=_call("say", {"text": "x"}, _meta())
        )
    assert response.status_code == 406
