"""The REST API under /api/v1 against a real server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.core.effects import Mode
from pincer.policy.grants import Grant
from pincer.store.sql import Sql
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

APPROVAL_TIMEOUT_CONFIG = "[approvals]\ntimeout_s = 0.5\n"


async def test_tools_are_listed_and_described(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        listing = (await http.get("/api/v1/tools")).json()
        say = await http.get("/api/v1/tools/say")
        missing = await http.get("/api/v1/tools/nope")
    names = [tool["name"] for tool in listing["tools"]]
    assert listing["session"] == "main" and names == sorted(names) and "say" in names
    assert say.json()["input_schema"]["required"] == ["text"]
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "tool_not_found"


async def test_call_returns_the_result_and_its_audit_id(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post("/api/v1/tools/say/call", json={"args": {"text": "hi"}})
    data = response.json()
    assert response.status_code == 200
    assert data == {"ok": True, "output": "hi", "cached": False, "audit_id": data["audit_id"]}
    assert (await gateway.pincer.audit.records())[-1].caller == "rest"


@pytest.mark.parametrize(
    ("tool", "args", "status", "code"),
    [
        ("nope", {}, 404, "tool_not_found"),
        ("say", {"text": 5}, 422, "invalid_arguments"),
    ],
)
async def test_failed_calls_map_to_statuses(
    gateway: LiveGateway, tool: str, args: dict, status: int, code: str
) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post(f"/api/v1/tools/{tool}/call", json={"args": args})
    assert response.status_code == status
    assert response.json()["ok"] is False and response.json()["error"]["code"] == code


async def test_idempotency_key_header_replays(gateway: LiveGateway) -> None:
    await gateway.pincer.dispatcher.grants.add(Grant(tool="write_note", default=Mode.ALLOW, source="tests"))
    async with gateway.http(headers=gateway.headers) as http:
        first = await http.post(
            "/api/v1/tools/write_note/call", json={"args": {"text": "a"}}, headers={"Idempotency-Key": "k-1"}
        )
        second = await http.post(
            "/api/v1/tools/write_note/call", json={"args": {"text": "a"}}, headers={"Idempotency-Key": "k-1"}
        )
        clash = await http.post(
            "/api/v1/tools/write_note/call",
            json={"args": {"text": "a"}, "idempotency_key": "k-2"},
            headers={"Idempotency-Key": "k-3"},
        )
    assert first.json()["cached"] is False and second.json()["cached"] is True
    assert second.json()["output"] == first.json()["output"]
    assert clash.status_code == 400 and "differ" in clash.json()["error"]["message"]


async def test_rate_limit_is_429_with_retry_after(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[limits.say]\ncalls_per_minute = 1\n") as live:
        async with live.http(headers=live.headers) as http:
            ok = await http.post("/api/v1/tools/say/call", json={"args": {"text": "1"}})
            limited = await http.post("/api/v1/tools/say/call", json={"args": {"text": "2"}})
    assert ok.status_code == 200
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "budget_exceeded"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


async def test_unanswered_approval_times_out_with_408(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=APPROVAL_TIMEOUT_CONFIG) as live:
        async with live.http(headers=live.headers) as http:
            response = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "x"}})
            expired = (await http.get("/api/v1/approvals", params={"status": "all"})).json()["approvals"]
    assert response.status_code == 408 and response.json()["error"]["code"] == "approval_timeout"
    assert [a["status"] for a in expired] == ["expired"]


async def test_approvals_are_listed_and_answered_once(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http, anyio.create_task_group() as tg:
        results: list = []

        async def call() -> None:
            results.append(await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "x"}}))

        tg.start_soon(call)
        with anyio.fail_after(10):
            while not (pending := (await http.get("/api/v1/approvals")).json()["approvals"]):
                await anyio.sleep(0.05)
        approval_id = pending[0]["id"]
        one = await http.get(f"/api/v1/approvals/{approval_id}")
        denied = await http.post(f"/api/v1/approvals/{approval_id}", json={"decision": "deny"})
        again = await http.post(f"/api/v1/approvals/{approval_id}", json={"decision": "allow_once"})
        unknown = await http.post("/api/v1/approvals/nope", json={"decision": "deny"})
        bad = await http.post(f"/api/v1/approvals/{approval_id}", json={"decision": "maybe"})
    assert one.json()["status"] == "pending"
    assert denied.json()["status"] == "deny" and denied.json()["answered_by"] == "rest:main"
    assert again.status_code == 409 and "already answered (deny)" in again.json()["error"]["message"]
    assert unknown.status_code == 404
    assert bad.status_code == 422
    assert results[0].status_code == 403 and results[0].json()["error"]["code"] == "approval_denied"


async def test_audit_lists_and_verifies(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        for text in ("a", "b", "c"):
            await http.post("/api/v1/tools/say/call", json={"args": {"text": text}})
        records = (await http.get("/api/v1/audit", params={"tool": "say", "limit": 2})).json()["records"]
        verified = await http.get("/api/v1/audit/verify")
        too_many = await http.get("/api/v1/audit", params={"limit": 0})
    assert [r["args"] for r in records] == [{"text": "b"}, {"text": "c"}]
    body = verified.json()
    assert body["ok"] is True and body["records"] == 3
    assert (body["keyed_from"], body["plain_records"], body["key_id"]) == (1, 0, gateway.pincer.audit.key_id)
    assert too_many.status_code == 422


async def test_audit_checkpoint_is_for_main_sessions_and_verifies(pincer_home: Path) -> None:
    from pincer.gateway.tokens import token_digest
    from pincer.store.checkpoint import AuditCheckpoint

    agent_token = "pcr_agent_token_for_checkpoint_tests_01"
    config = f'[[gateway.tokens]]\nsha256 = "{token_digest(agent_token)}"\nsession = "agent"\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.http(headers=live.headers) as http:
            await http.post("/api/v1/tools/say/call", json={"args": {"text": "a"}})
            made = await http.get("/api/v1/audit/checkpoint")
        async with live.http(headers={"Authorization": f"Bearer {agent_token}"}) as http:
            refused = await http.get("/api/v1/audit/checkpoint")
        assert made.status_code == 200
        checkpoint = AuditCheckpoint.from_text(made.text)
        assert checkpoint.records == 1 and (await live.pincer.audit.verify_checkpoint(checkpoint)).records == 1
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "session_forbidden"


async def test_audit_verify_reports_a_broken_chain(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        await http.post("/api/v1/tools/say/call", json={"args": {"text": "a"}})
        await gateway.pincer.db.execute(Sql("UPDATE audit SET tool = 'tampered' WHERE id = 1"))
        verified = await http.get("/api/v1/audit/verify")
    assert verified.status_code == 409 and verified.json()["error"]["code"] == "audit_chain_broken"


async def test_openapi_document_describes_the_api(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        document = (await http.get("/api/v1/openapi.json")).json()
        unknown = await http.get("/api/v1/nothing-here")
    assert document["openapi"].startswith("3.")
    assert {"/tools", "/tools/{name}/call", "/approvals", "/approvals/{approval_id}", "/audit", "/audit/verify"} <= set(
        document["paths"]
    )
    body = document["paths"]["/tools/{name}/call"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/CallBody")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


async def test_audit_verify_walks_on_from_the_last_one_off_the_loop_and_full_walks_everything(gateway: LiveGateway) -> None:
    """``GET /audit/verify`` walks from the last intact verify; ``?full=1`` every record. The
    chain values are computed on worker threads, never on the gateway's loop (this test's thread)."""
    from tests.store.test_audit_verify_off_loop import LoopThreadHashes

    async with gateway.http(headers=gateway.headers) as http:
        for text in ("a", "b", "c"):
            await http.post("/api/v1/tools/say/call", json={"args": {"text": text}})
        with LoopThreadHashes() as probe:
            first = await http.get("/api/v1/audit/verify")
        await gateway.pincer.db.execute(Sql("UPDATE audit SET tool = 'tampered' WHERE id = 1"))
        since = await http.get("/api/v1/audit/verify")
        full = await http.get("/api/v1/audit/verify", params={"full": "1"})
        progress = await http.get("/api/v1/audit/verify/progress")
    assert probe.on_loop == 0 and first.json()["ok"] is True and first.json()["records"] == 3
    assert since.json()["ok"] is True and since.json()["full"] is False  # record 1 was vouched for by the mark
    assert full.status_code == 409 and "audit record 1 was altered" in full.json()["error"]["message"]
    assert progress.json() == {"running": False}
