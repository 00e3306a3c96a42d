"""A REST body is read as JSON when it is JSON, whatever its content-type says; a body that is
not JSON gets 415 saying to send `content-type: application/json`. Against a real server."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.gateway.conftest import LiveGateway

pytestmark = pytest.mark.anyio

CALL = json.dumps({"args": {"text": "hi"}}).encode()


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "application/vnd.x+json"],
)
async def test_a_json_call_body_is_read_whatever_its_content_type(gateway: LiveGateway, content_type: str | None) -> None:
    """Failed on main before: without `content-type: application/json` (curl -d sends a form
    type) the answer was 422 "Input should be a valid dictionary or object to extract fields from"."""
    headers = gateway.headers | ({"content-type": content_type} if content_type else {})
    async with gateway.http(headers=headers) as http:
        response = await http.post("/api/v1/tools/say/call", content=CALL)
    assert response.status_code == 200, response.text
    assert response.json()["output"] == "hi"


async def test_a_body_that_is_not_json_is_415_and_audited(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers | {"content-type": "application/x-www-form-urlencoded"}) as http:
        response = await http.post("/api/v1/tools/say/call", content=b"args=hi")
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert "not JSON" in error["message"] and "application/x-www-form-urlencoded" in error["message"]
    assert "content-type: application/json" in error["hint"]
    record = (await gateway.pincer.audit.records())[-1]
    assert record.tool == "say" and record.error_code == "unsupported_media_type"


async def test_json_declared_but_malformed_stays_a_400(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post("/api/v1/tools/say/call", content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed_json"


async def test_an_approval_answer_without_a_content_type(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http, anyio.create_task_group() as tg:
        results: list = []

        async def call() -> None:
            results.append(await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "x"}}))

        tg.start_soon(call)
        with anyio.fail_after(30):
            while not (pending := (await http.get("/api/v1/approvals")).json()["approvals"]):
                await anyio.sleep(0.05)
        approval_id = pending[0]["id"]
        not_json = await http.post(f"/api/v1/approvals/{approval_id}", content=b"decision=deny")
        answered = await http.post(f"/api/v1/approvals/{approval_id}", content=json.dumps({"decision": "deny"}).encode())
    assert not_json.status_code == 415 and not_json.json()["error"]["code"] == "unsupported_media_type"
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "deny"
    assert results[0].status_code == 403


async def test_an_empty_body_is_left_to_the_route(gateway: LiveGateway) -> None:
    async with gateway.http(headers=gateway.headers) as http:
        response = await http.post("/api/v1/tools/say/call", content=b"")
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
