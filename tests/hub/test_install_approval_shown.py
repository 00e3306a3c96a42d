"""What a person is asked to approve for ``skills_install`` (second-hour item 6): the elicitation
an MCP client shows, and the approval over REST, carry what docs/hub.md promises (the requested
tools, the scanner's verdict and findings, the fingerprint), through a real ``pincer serve``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import pincer_serve
from tests.hub.test_agent_tools import catalog  # noqa: F401  # the fixture: a hub with alice's skills

CALL_TIMEOUT_S = 60.0


def test_the_install_approval_shows_tools_scanner_findings_and_fingerprint(catalog: Path) -> None:  # noqa: F811
    """Failed before the fix: the elicitation said only "an agent wants to install
    skills/meeting-notes@1.0.1 from team (signed by alice)"."""
    asked: list[str] = []
    rest_messages: list[str] = []

    with pincer_serve(catalog) as server:
        token = server.token

        async def elicit(context: Any, params: Any) -> types.ElicitResult:
            asked.append(params.message)
            async with httpx.AsyncClient(base_url=server.info["api_url"], trust_env=False, timeout=CALL_TIMEOUT_S) as http:
                pending = (await http.get("/approvals", headers={"Authorization": f"Bearer {token}"})).json()["approvals"]
            rest_messages.extend(p["message"] for p in pending)
            return types.ElicitResult(action="decline")

        async def drive() -> Any:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
                async with Client(streamable_http_client(server.info["mcp_url"], http_client=http), mode="legacy",
                                  elicitation_callback=elicit) as client:  # fmt: skip
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        return await client.call_tool("skills_install", {"key": "meeting-notes"})

        result = anyio.run(drive)
    assert result.is_error  # declined
    (message,) = asked
    assert "install skills/meeting-notes@1.0.1 from team (signed by alice)" in message
    assert "- fingerprint: sha256:" in message
    assert '- scanner: {"verdict": "clean", "findings": []}' in message
    assert '- requested: {"tools": ["read_file", "write_file"]}' in message
    assert "plan_id" not in message
    assert rest_messages == [message]
