"""The direct path for handshake-era ``tools/call`` and ``tools/list`` (gateway/handshake.py)
answers what the SDK's path answers, keeps the SDK's checks, and leaves to the SDK whatever it
is not sure of. A call asking for progress (``progressToken``) always takes the SDK's path, so
it is the reference each direct answer is compared with."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pincer.gateway.reply import REQUEST_ID_PREFIX
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
CALL_TIMEOUT_S = 20.0
POLL_S = 0.05
OTHER_TOKEN = "other-principal-token-0123456789"


def _sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


def _message(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    return _sse_messages(response.text)[-1]


class Session:
    def __init__(self, http: httpx.AsyncClient, session_id: str) -> None:
        self.http = http
        self.session_id = session_id
        self.ids = iter(range(1, 10**6))

    def headers(self, **extra: str) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Session-Id": self.session_id,
            **extra,
        }

    async def post(self, message: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.http.post("/mcp", headers=self.headers(**headers), json=message)

    async def call(self, name: str, arguments: Any, meta: dict[str, Any] | None = None) -> httpx.Response:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        return await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params})


@asynccontextmanager
async def session(
    live: LiveGateway, *, capabilities: dict[str, Any] | None = None, token: str | None = None
) -> AsyncIterator[Session]:
    headers = {"Authorization": f"Bearer {token or live.token}"}
    async with live.http(headers=headers, timeout=CALL_TIMEOUT_S) as http:
        init = {
            "protocolVersion": VERSION,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "test", "version": "0"},
        }
        opened = await http.post(
            "/mcp",
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        )
        assert opened.status_code == 200, opened.text
        opened_session = Session(http, opened.headers["mcp-session-id"])
        done = await opened_session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202
        yield opened_session


def _without_audit_id(result: dict[str, Any]) -> dict[str, Any]:
    result = json.loads(json.dumps(result))
    result["_meta"].pop("pincer/auditId")
    return result


async def test_a_plain_call_is_answered_as_json_with_what_the_sdk_path_answers(gateway: LiveGateway) -> None:
    async with session(gateway) as s:
        direct = await s.call("say", {"text": "fast"})
        reference = await s.call("say", {"text": "fast"}, {"progressToken": "p1"})
        failed = await s.call("say", {"txt": "typo"})
        failed_reference = await s.call("say", {"txt": "typo"}, {"progressToken": "p2"})
    assert direct.headers["content-type"] == "application/json"
    assert direct.headers["mcp-session-id"] == s.session_id
    assert reference.headers["content-type"].startswith("text/event-stream")  # the SDK's own path
    assert _without_audit_id(_message(direct)["result"]) == _without_audit_id(_message(reference)["result"])
    assert _message(failed)["result"]["isError"] is True
    assert _without_audit_id(_message(failed)["result"]) == _without_audit_id(_message(failed_reference)["result"])
    assert [(r.caller, r.tool, r.outcome) for r in await gateway.pincer.audit.records()] == [
        ("mcp", "say", "ok"),
        ("mcp", "say", "ok"),
        ("mcp", "say", "error"),
        ("mcp", "say", "error"),
    ]


async def test_tools_list_is_answered_as_json_with_what_the_sdk_path_answers(gateway: LiveGateway) -> None:
    async with session(gateway) as s:
        direct = await s.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        reference = await s.post(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {"progressToken": "p"}}}
        )
    assert direct.headers["content-type"] == "application/json"
    assert reference.headers["content-type"].startswith("text/event-stream")
    assert _message(direct)["result"] == _message(reference)["result"]
    assert {"say", "report", "write_note"} <= {tool["name"] for tool in _message(direct)["result"]["tools"]}


async def test_another_principal_cannot_use_the_session(pincer_home: Path) -> None:
    digest = hashlib.sha256(OTHER_TOKEN.encode()).hexdigest()
    config = f'[[gateway.tokens]]\nsha256 = "{digest}"\nsession = "ci-bot"\n'
    async with live_gateway(pincer_home, config=config) as live, session(live) as s:
        headers = {"Authorization": f"Bearer {OTHER_TOKEN}"}
        async with live.http(headers=headers, timeout=CALL_TIMEOUT_S) as other:
            stolen = await other.post(
                "/mcp",
                headers=s.headers(),
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "say", "arguments": {}}},
            )
        assert stolen.status_code == 404  # as if the session did not exist (the SDK's answer)
        assert [r for r in await live.pincer.audit.records() if r.tool == "say"] == []


async def test_what_the_path_is_not_sure_of_goes_to_the_sdk(gateway: LiveGateway) -> None:
    async with session(gateway) as s:
        # Another version than the session negotiated: the SDK decides what that means.
        other_version = await s.post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "say", "arguments": {"text": "v"}}},
            **{"MCP-Protocol-Version": "2025-06-18"},
        )
        # Arguments that are not an object: the SDK path audits the malformed call and refuses it.
        malformed = await s.call("say", ["not", "an", "object"])
        unknown = await s.http.post(
            "/mcp",
            headers={**s.headers(), "Mcp-Session-Id": "0" * 32},
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "say", "arguments": {}}},
        )
    assert other_version.headers["content-type"].startswith("text/event-stream")
    refusal = _message(malformed)
    assert refusal["error"]["code"] == -32602 and refusal["error"]["data"]["auditId"]
    assert unknown.status_code == 404
    rejected = (await gateway.pincer.audit.records())[-1]
    assert (rejected.id, rejected.outcome) == (refusal["error"]["data"]["auditId"], "error")


async def test_a_call_that_logs_is_streamed_on_the_direct_path(gateway: LiveGateway) -> None:
    async with session(gateway) as s:
        response = await s.call("report", {})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["mcp-session-id"] == s.session_id
    messages = _sse_messages(response.text)
    assert [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"] == ["reporting"]
    assert not [m for m in messages if m.get("method") == "notifications/progress"]  # none was asked for
    assert messages[-1]["result"]["content"][0]["text"] == "reported"


async def test_an_approval_is_asked_by_elicitation_on_the_direct_path(gateway: LiveGateway) -> None:
    """A main session's client that can elicit is asked mid-call on this POST's stream, and its
    answer, POSTed to the session, is taken only from that session."""
    async with session(gateway, capabilities={"elicitation": {}}) as s, session(gateway) as intruder:
        params = {"name": "write_note", "arguments": {"text": "hi"}}
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        async with s.http.stream("POST", "/mcp", headers=s.headers(), json=message) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.aiter_lines()
            with anyio.fail_after(CALL_TIMEOUT_S):
                async for line in lines:
                    if line.startswith("data:"):
                        asked = json.loads(line[5:])
                        break
            assert asked["method"] == "elicitation/create" and asked["id"].startswith(REQUEST_ID_PREFIX)
            answer = {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"action": "accept", "content": {"decision": "allow_once"}},
            }
            # The same answer from another session is not taken as the answer.
            elsewhere = await intruder.post(answer)
            assert elsewhere.status_code == 202  # the SDK acknowledges a response it cannot place
            assert await gateway.pincer.approvals.list_pending()
            accepted = await s.post(answer)
            assert accepted.status_code == 202
            with anyio.fail_after(CALL_TIMEOUT_S):
                async for line in lines:
                    if line.startswith("data:"):
                        final = json.loads(line[5:])
                        break
    assert final["id"] == 7 and not final["result"].get("isError"), final
    approval = (await gateway.pincer.approvals.list(status=None))[-1]
    assert (approval.answered_by, approval.status.value) == ("mcp-elicitation:main", "allow_once")


async def test_a_cancelled_call_is_answered_as_cancelled_and_recorded(pincer_home: Path) -> None:
    config = '[approvals]\ntimeout_s = 60\n[sessions.ci-bot]\nkind = "non-main"\nallow = ["write_note"]\n'
    digest = hashlib.sha256(OTHER_TOKEN.encode()).hexdigest()
    config += f'[[gateway.tokens]]\nsha256 = "{digest}"\nsession = "ci-bot"\n'
    async with live_gateway(pincer_home, config=config) as live, session(live, token=OTHER_TOKEN) as s:
        answers: list[httpx.Response] = []

        async def call() -> None:
            answers.append(await s.call("write_note", {"text": "never"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(CALL_TIMEOUT_S):
                while not await live.pincer.approvals.list_pending():
                    await anyio.sleep(POLL_S)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            assert (await s.post(cancel)).status_code == 202
        (answer,) = answers
        assert _message(answer) == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32800, "message": "Request cancelled"},
        }
        (record,) = [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]
        assert record.outcome == "cancelled" and "cancelled" in (record.error or "")


async def test_a_deleted_session_is_not_served(gateway: LiveGateway) -> None:
    async with session(gateway) as s:
        assert (await s.call("say", {"text": "before"})).status_code == 200
        deleted = await s.http.delete("/mcp", headers=s.headers())
        assert deleted.status_code == 200
        after = await s.call("say", {"text": "after"})
    assert after.status_code == 404
    assert [r.tool for r in await gateway.pincer.audit.records()] == ["say"]


async def test_a_call_in_flight_ends_with_its_session(pincer_home: Path) -> None:
    """Deleting the session ends its calls on the direct path the way the SDK ends its own: the
    call is cancelled (and recorded), its approval expires, and the POST's stream closes empty."""
    config = '[approvals]\ntimeout_s = 60\n[sessions.ci-bot]\nkind = "non-main"\nallow = ["write_note"]\n'
    digest = hashlib.sha256(OTHER_TOKEN.encode()).hexdigest()
    config += f'[[gateway.tokens]]\nsha256 = "{digest}"\nsession = "ci-bot"\n'
    async with live_gateway(pincer_home, config=config) as live, session(live, token=OTHER_TOKEN) as s:
        answers: list[httpx.Response] = []

        async def call() -> None:
            answers.append(await s.call("write_note", {"text": "never"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(CALL_TIMEOUT_S):
                while not await live.pincer.approvals.list_pending():
                    await anyio.sleep(POLL_S)
            (pending,) = await live.pincer.approvals.list_pending()
            assert (await s.http.delete("/mcp", headers=s.headers())).status_code == 200
        (answer,) = answers
        assert answer.headers["content-type"].startswith("text/event-stream") and _sse_messages(answer.text) == []
        assert (await live.pincer.approvals.get(pending.id)).status.value == "expired"
        (record,) = [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]
        assert "cancelled" in (record.error or "")


async def test_tools_list_follows_a_reloaded_config(gateway: LiveGateway) -> None:
    """Failed on main before issue 11: the gateway kept each session's filtered tool list until
    the registry changed, so a session's new deny list in a reloaded config.toml did not hide
    the tool from tools/list."""
    from pincer.config import parse_config

    async with session(gateway) as s:
        before = await s.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "say" in {tool["name"] for tool in _message(before)["result"]["tools"]}
        edited = parse_config('[sessions.main]\nkind = "main"\ndeny = ["say"]\n', home=gateway.pincer.home)
        await gateway.pincer.apply_config(edited)
        after = await s.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        reference = await s.post(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"progressToken": "p"}}}
        )
    for response in (after, reference):
        names = {tool["name"] for tool in _message(response)["result"]["tools"]}
        assert "say" not in names and "report" in names
