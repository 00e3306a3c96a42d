"""Refusals: wrong or missing token, foreign Host/Origin, oversized bodies, malformed JSON-RPC
and REST bodies. Each is a clear JSON error; a refused call attempt with a valid token is in
the audit log, one without is only counted (``GET /api/v1/metrics``); and the server keeps
serving afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY = {**MCP_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
SMALL_LIMIT_CONFIG = "[gateway]\nmax_body_bytes = 4096\n"


def _rpc_call(tool: str = "say", arguments: Any = None, rpc_id: int = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments or {"text": "hi"}},
    }


def _modern(params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    }
    return {**params, "_meta": meta}


async def _still_serving(live: LiveGateway) -> None:
    async with live.http(headers=live.headers) as http:
        response = await http.post("/api/v1/tools/say/call", json={"args": {"text": "still here"}})
    assert response.status_code == 200 and response.json()["output"] == "still here"


async def _last_record(live: LiveGateway) -> Any:
    return (await live.pincer.audit.records())[-1]


# -- tokens ------------------------------------------------------------------------------------


async def _unauthenticated_refusals(live: LiveGateway) -> dict[str, Any]:
    async with live.http(headers=live.headers) as http:
        response = await http.get("/api/v1/metrics")
    assert response.status_code == 200
    return response.json()["gateway"]["refused_unauthenticated"]


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-value", "Basic dXNlcjpwYXNz", "Bearer"])
async def test_rest_call_without_the_right_token_is_401_and_counted_not_audited(
    gateway: LiveGateway, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with gateway.http(headers=headers) as http:
        response = await http.post("/api/v1/tools/say/call", json={"args": {"text": "hi"}})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["code"] == "unauthorized" and "pincer token" in error["hint"]
    assert await gateway.pincer.audit.records() == []
    assert await _unauthenticated_refusals(gateway) == {"total": 1, "by_code": {"unauthorized": 1}}
    await _still_serving(gateway)


async def test_mcp_call_without_a_token_is_a_jsonrpc_error_and_counted_not_audited(gateway: LiveGateway) -> None:
    async with gateway.http() as http:
        response = await http.post("/mcp", headers=LEGACY, json=_rpc_call("write_note", {"text": "x"}))
    assert response.status_code == 401
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "unauthorized"
    assert "bearer token" in body["error"]["message"]
    assert await gateway.pincer.audit.records() == []
    assert (await _unauthenticated_refusals(gateway))["total"] == 1
    await _still_serving(gateway)


async def test_metrics_are_for_main_sessions(pincer_home: Path) -> None:
    from pincer.gateway.tokens import token_digest

    agent_token = "pcr_agent_token_for_metrics_tests_0123"
    config = f'[[gateway.tokens]]\nsha256 = "{token_digest(agent_token)}"\nsession = "agent"\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.http(headers={"Authorization": f"Bearer {agent_token}"}) as http:
            refused = await http.get("/api/v1/metrics")
        assert await _unauthenticated_refusals(live) == {"total": 0, "by_code": {}}
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "session_forbidden"


async def test_a_refused_request_that_is_not_a_call_leaves_no_record(gateway: LiveGateway) -> None:
    before = len(await gateway.pincer.audit.records())
    async with gateway.http() as http:
        assert (await http.get("/api/v1/tools")).status_code == 401
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert (await http.post("/mcp", headers=LEGACY, json=listing)).status_code == 401
    assert len(await gateway.pincer.audit.records()) == before


async def test_healthz_needs_no_token_but_still_a_local_host(gateway: LiveGateway) -> None:
    async with gateway.http() as http:
        assert (await http.get("/healthz")).json()["status"] == "ok"
        assert (await http.get("/healthz", headers={"Host": "evil.example"})).status_code == 421


async def test_a_configured_token_runs_under_its_own_session(pincer_home: Path) -> None:
    from pincer.gateway.tokens import token_digest

    agent_token = "pcr_agent_token_for_tests_0123456789"
    config = f'[[gateway.tokens]]\nsha256 = "{token_digest(agent_token)}"\nsession = "agent"\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.http(headers={"Authorization": f"Bearer {agent_token}"}) as http:
            listing = (await http.get("/api/v1/tools")).json()
            as_main = await http.post("/api/v1/tools/say/call", json={"args": {"text": "x"}, "session": "main"})
            answer = await http.post("/api/v1/approvals/anything", json={"decision": "allow_once"})
            audit = await http.get("/api/v1/audit", params={"session": "main"})
        async with live.mcp(mode="legacy", token=agent_token) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        # A non-main session starts from the sandbox policy: say is not on its allow list.
    assert listing["session"] == "agent"
    assert "say" not in {t["name"] for t in listing["tools"]} and "say" not in names
    assert as_main.status_code == 403 and as_main.json()["error"]["code"] == "session_forbidden"
    assert answer.status_code == 403 and "may not answer approvals" in answer.json()["error"]["message"]
    assert audit.status_code == 403


# -- Host and Origin ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Host": "evil.example"}, 421, "foreign_host"),
        ({"Host": "evil.example:8765"}, 421, "foreign_host"),
        ({"Host": "127.0.0.1.evil.example"}, 421, "foreign_host"),
        ({"Origin": "http://evil.example"}, 403, "foreign_origin"),
        ({"Origin": "https://localhost.evil.example:443"}, 403, "foreign_origin"),
        ({"Origin": "null"}, 403, "foreign_origin"),
    ],
)
async def test_foreign_host_or_origin_is_refused_and_audited_when_the_token_is_valid(
    gateway: LiveGateway, headers: dict[str, str], status: int, code: str
) -> None:
    async with gateway.http(headers={**gateway.headers, **headers}) as http:
        rest = await http.post("/api/v1/tools/say/call", json={"args": {"text": "hi"}})
        mcp = await http.post("/mcp", headers=LEGACY, json=_rpc_call())
    assert rest.status_code == status and rest.json()["error"]["code"] == code
    assert mcp.status_code == status and mcp.json()["error"]["data"]["code"] == code
    records = (await gateway.pincer.audit.records())[-2:]
    assert [(r.caller, r.tool, r.session, r.outcome) for r in records] == [
        ("rest", "say", "main", "denied"),
        ("mcp", "say", "main", "denied"),
    ]
    assert all(code in r.reason for r in records)
    await _still_serving(gateway)


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [({"Host": "evil.example"}, 421, "foreign_host"), ({"Origin": "http://evil.example"}, 403, "foreign_origin")],
)
async def test_foreign_host_or_origin_without_a_valid_token_is_counted_not_audited(
    gateway: LiveGateway, headers: dict[str, str], status: int, code: str
) -> None:
    async with gateway.http(headers={"Authorization": "Bearer not-the-token", **headers}) as http:
        rest = await http.post("/api/v1/tools/say/call", json={"args": {"text": "hi"}})
        mcp = await http.post("/mcp", headers=LEGACY, json=_rpc_call())
    assert rest.status_code == status and mcp.status_code == status
    assert await gateway.pincer.audit.records() == []
    assert await _unauthenticated_refusals(gateway) == {"total": 2, "by_code": {code: 2}}


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "localhost:1234"},
        {"Origin": "http://localhost:3000"},
        {"Origin": "http://127.0.0.1"},
        {"Origin": "http://[::1]:9"},
    ],
)
async def test_local_host_and_origin_names_are_accepted(gateway: LiveGateway, headers: dict[str, str]) -> None:
    async with gateway.http(headers={**gateway.headers, **headers}) as http:
        assert (await http.get("/api/v1/tools")).status_code == 200


async def test_configured_names_extend_the_allowed_hosts_and_origins(pincer_home: Path) -> None:
    config = '[gateway]\nallowed_hosts = ["pincer.internal"]\nallowed_origins = ["https://console.example"]\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.http(headers=live.headers) as http:
            named = await http.get(
                "/api/v1/tools", headers={"Host": "pincer.internal:8765", "Origin": "https://console.example"}
            )
            other = await http.get("/api/v1/tools", headers={"Origin": "https://other.example"})
    assert named.status_code == 200 and other.status_code == 403


# -- body size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_oversized_bodies_are_413_and_audited(pincer_home: Path, chunked: bool) -> None:
    big_args = {"text": "x" * 10_000}
    async with live_gateway(pincer_home, config=SMALL_LIMIT_CONFIG) as live:
        async with live.http(headers=live.headers) as http:

            def body(payload: dict[str, Any]) -> Any:
                data = json.dumps(payload).encode()
                if not chunked:
                    return data

                async def stream() -> Any:
                    for start in range(0, len(data), 1000):
                        yield data[start : start + 1000]

                return stream()

            rest = await http.post(
                "/api/v1/tools/say/call",
                content=body({"args": big_args}),
                headers={"Content-Type": "application/json"},
            )
            mcp = await http.post("/mcp", headers=LEGACY, content=body(_rpc_call("say", big_args)))
        records = (await live.pincer.audit.records())[-2:]
        await _still_serving(live)
    assert rest.status_code == 413 and rest.json()["error"]["code"] == "body_too_large"
    assert "4096 bytes" in rest.json()["error"]["message"] and "max_body_bytes" in rest.json()["error"]["hint"]
    assert mcp.status_code == 413 and mcp.json()["error"]["data"]["code"] == "body_too_large"
    assert [(r.caller, r.tool, r.outcome) for r in records] == [("rest", "say", "denied"), ("mcp", "say", "denied")]


# -- malformed bodies --------------------------------------------------------------------------


async def test_malformed_jsonrpc_is_a_parse_error_and_the_server_keeps_serving(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        broken = await http.post("/mcp", headers=LEGACY, content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/ca')
        modern = await http.post(
            "/mcp", headers={**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28"}, content=b"[not json"
        )
        batch = await http.post(
            "/mcp", headers={**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28"}, content=b'[{"jsonrpc": "2.0"}]'
        )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
    assert modern.status_code == 400 and modern.json()["error"]["code"] == -32700
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600
    await _still_serving(gateway)


@pytest.mark.parametrize("arguments", ['"a string"', "[1, 2]", "42"])
async def test_tools_call_with_non_object_arguments_is_invalid_params_and_audited(
    gateway: LiveGateway, arguments: str
) -> None:
    params = {"name": "say", "arguments": json.loads(arguments)}
    request = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": _modern(params)}
    async with gateway.http(headers={**gateway.headers, **MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28"}) as http:
        response = await http.post("/mcp", json=request, headers={"Mcp-Method": "tools/call", "Mcp-Name": "say"})
    body = response.json()
    assert body["id"] == 9 and body["error"]["code"] == -32602
    assert "must be a JSON object" in body["error"]["message"]
    record = await _last_record(gateway)
    assert (record.id, record.caller, record.tool, record.error_code) == (
        body["error"]["data"]["auditId"], "mcp", "say", "invalid_arguments",
    )  # fmt: skip
    await _still_serving(gateway)


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b'{"args": {"text": "hi"', 400, "malformed_json"),
        (b'{"args": "not an object"}', 422, "invalid_request"),
        (b'{"args": {}, "surprise": 1}', 422, "invalid_request"),
        (b"[]", 422, "invalid_request"),
    ],
)
async def test_malformed_rest_bodies_are_clear_errors_and_audited(
    gateway: LiveGateway, content: bytes, status: int, code: str
) -> None:
    async with gateway.http(headers={**gateway.headers, "Content-Type": "application/json"}) as http:
        response = await http.post("/api/v1/tools/say/call", content=content)
    error = response.json()["error"]
    assert response.status_code == status and error["code"] == code
    assert error["message"].startswith("request body:") and error["hint"]
    record = await _last_record(gateway)
    assert (record.caller, record.tool, record.outcome, record.error_code) == (
        "rest",
        "say",
        "error",
        "invalid_arguments",
    )
    await _still_serving(gateway)


async def test_header_values_are_read_without_surrounding_whitespace(gateway: LiveGateway) -> None:
    """RFC 9110 5.5; httpx will not send such headers, so this one is written by hand."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": _modern({"name": "say", "arguments": {"text": "ws"}}),
        }
    )
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{gateway.info.port}\r\nAuthorization: Bearer {gateway.token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: \t2026-07-28 \r\nMcp-Method:  tools/call\r\nMcp-Name:   say  \r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    )
    async with await anyio.connect_tcp("127.0.0.1", gateway.info.port) as stream:
        await stream.send(request.encode())
        response = b""
        with anyio.fail_after(10):
            try:
                while True:
                    response += await stream.receive()
            except anyio.EndOfStream:
                pass
    head, _, payload = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(payload)["result"]["content"][0]["text"] == "ws"
