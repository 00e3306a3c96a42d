"""A tool output JSON cannot carry (NaN, Infinity) is an error with its reason, on every path.

Python's json writes ``NaN`` and ``Infinity``, which are not JSON (RFC 8259 section 6): a client's
parser refuses the whole answer, so one float of a native tool broke the call for REST and MCP
clients alike, while pincer had counted and audited it as a success."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pincer.core.values import CallRequest, HostContext, ToolOutput
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, fixture
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio

VALUES = {"nan": math.nan, "infinity": math.inf, "minus_infinity": -math.inf}


@fixture("stats", "Returns a float that is not a JSON number", {"type": "object", "properties": {"which": {"type": "string"}}})
async def _stats(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return ToolOutput(value={"mean": VALUES[args["which"]], "n": 0})


@pytest.mark.parametrize("which", sorted(VALUES))
async def test_a_float_json_cannot_carry_fails_the_call_saying_why(tmp_path: Path, which: str) -> None:
    async with live_gateway(tmp_path, extra_runtime=False) as live:
        await live.pincer.add_runtime(FixtureRuntime([_stats]))
        result = await live.pincer.call(CallRequest(tool="stats", args={"which": which}))
        assert not result.ok, f"a {which} output was returned as a success: {result.output!r}"
        assert result.error is not None and "NaN or Infinity is not a JSON number" in result.error["message"], result.error
        async with live.http(headers=live.headers) as http:
            answer = await http.post("/api/v1/tools/stats/call", json={"args": {"which": which}})
        body = json.loads(answer.text)  # strict: no NaN/Infinity
        assert body["ok"] is False and "NaN or Infinity is not a JSON number" in body["error"]["message"], body
        async with live.mcp() as client:
            called = await client.call_tool("stats", {"which": which})
        assert called.is_error and "NaN or Infinity is not a JSON number" in str(called.content), called
        records = await live.pincer.audit.records(limit=5)
        assert [(r.outcome, r.error_code) for r in records if r.tool == "stats"] == [("error", "tool_error")] * 3, records
