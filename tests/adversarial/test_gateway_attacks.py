"""A hostile agent against the gateway: self-approval over MCP, peeking at denied tools.
(The front-door rules, token and Host/Origin, are kept holding in test_secrets_and_audit.py.)

Each regression test names its hardening item (issue 9) and what main did before the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from pincer.gateway.tokens import token_digest
from pincer.store import ApprovalStatus
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
BOT_TOKEN = "pcr_ci_bot_token_for_the_adversarial_suite_01"
CONFIG = f"""
[approvals]
timeout_s = 2
[sessions.ci-bot]
kind = "non-main"
allow = ["write_note", "say"]
[[gateway.tokens]]
sha256 = "{token_digest(BOT_TOKEN)}"
session = "ci-bot"
"""
CALL_TIMEOUT_S = 30.0


@ERAS
async def test_a_non_main_session_is_never_asked_to_approve_its_own_call(pincer_home: Path, mode: str) -> None:
    """Item 1. Failed on main before the fix: ci-bot's client got its own write_note approval as
    an elicitation, answered allow_always, and so made a grant for everyone."""
    asked: list[str] = []

    async def approve_everything(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_always"})

    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.mcp(mode=mode, token=BOT_TOKEN, elicitation_callback=approve_everything) as client:
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool("write_note", {"text": "self-approved?"})
        approvals = await live.pincer.approvals.list(status=None)
        grants = await live.pincer.grants.all()
    assert asked == []
    assert result.is_error  # nobody answered within approvals.timeout_s
    (approval,) = approvals
    assert approval.session == "ci-bot" and approval.session_kind == "non-main"
    assert approval.status is ApprovalStatus.EXPIRED and approval.answered_by is None
    assert grants == ()


def _as_if_missing(error: dict[str, str], missing: str, hidden: str) -> dict[str, str]:
    return {k: v.replace(f"'{missing}'", f"'{hidden}'") for k, v in error.items()}


async def test_rest_does_not_describe_a_tool_the_session_policy_denies(pincer_home: Path) -> None:
    """Item 8. Failed on main before the fix: GET /api/v1/tools/{name} described tools the
    caller's session policy denies (schema, effects), though the list hid them."""
    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.http(headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as http:
            hidden = await http.get("/api/v1/tools/report")
            missing = await http.get("/api/v1/tools/no_such_tool")
            allowed = await http.get("/api/v1/tools/say")
            listing = (await http.get("/api/v1/tools")).json()
    assert hidden.status_code == 404 and missing.status_code == 404
    # the same answer as for a missing tool (issue 38: it names the session's own list and key)
    assert hidden.json()["error"] == _as_if_missing(missing.json()["error"], "no_such_tool", "report")
    assert hidden.json()["error"]["message"].startswith("no tool named 'report' in session 'ci-bot'")
    assert allowed.status_code == 200
    assert {t["name"] for t in listing["tools"]} == {"say", "write_note"}



async def test_calling_a_tool_the_session_may_not_see_is_the_same_404_as_a_missing_one(pincer_home: Path) -> None:
    """Failed on main before this test: ``POST /api/v1/tools/report/call`` from a session whose
    policy hides ``report`` answered 403 "denied" (naming the policy), where ``GET
    /api/v1/tools/report`` and the README say 404: the call told the session the tool exists."""
    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.http(headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as http:
            hidden = await http.post("/api/v1/tools/report/call", json={"args": {}})
            missing = await http.post("/api/v1/tools/no_such_tool/call", json={"args": {}})
            allowed = await http.post("/api/v1/tools/say/call", json={"args": {"text": "hi"}})
        records = [r for r in await live.pincer.audit.records() if r.tool == "report"]
    assert hidden.status_code == 404 and missing.status_code == 404, hidden.text
    assert hidden.json()["error"]["code"] == missing.json()["error"]["code"] == "tool_not_found"
    # Word for word what a missing tool gets: the session learns nothing of the hidden one (the
    # message says that a policy hides what it does not allow, for every name alike).
    assert hidden.json()["error"] == _as_if_missing(missing.json()["error"], "no_such_tool", "report")
    assert "report" not in hidden.text.replace("'report'", "")  # no schema, no effects, no description
    assert allowed.status_code == 200, allowed.text
    assert [r.decision for r in records] == ["deny"], "the refused call is still audited"


@ERAS
async def test_an_mcp_call_to_a_tool_the_session_may_not_see_reads_as_a_missing_one(pincer_home: Path, mode: str) -> None:
    """Failed on main before this test: the same call over MCP answered "session 'ci-bot'
    (config.toml) allows only write_note, say; report is not on its allow list", where a missing
    tool gets "no tool named ..." and tools/list hid it: the answer told the session it exists."""
    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.mcp(mode=mode, token=BOT_TOKEN) as client:
            with anyio.fail_after(CALL_TIMEOUT_S):
                hidden = await client.call_tool("report", {})
                missing = await client.call_tool("no_such_tool", {})
    assert hidden.is_error and missing.is_error
    assert hidden.content[0].text == missing.content[0].text.replace("'no_such_tool'", "'report'")
    assert hidden.content[0].text.startswith("no tool named 'report' in session 'ci-bot'")
    assert "`pincer tools list --session ci-bot`" in hidden.content[0].text
