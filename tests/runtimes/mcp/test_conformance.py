"""The official MCP conformance suite's client scenarios, run against pincer's MCP client.

Node 22 and @modelcontextprotocol/conformance come from `make mcp-deps`. Scenarios pincer does
not support are listed in conformance-baseline.yml: the suite then exits 0 for them while they
fail, and 1 (a stale baseline) if one starts passing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtimes.mcp.conftest import NODE22, NPM_CACHE, npm_ready

HERE = Path(__file__).parent
SUITE = NPM_CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CLIENT = HERE / "conformance_client.py"
BASELINE = HERE / "conformance-baseline.yml"
SCENARIO_TIMEOUT_S = 60


def run_scenario(scenario: str, out: Path, *, lean: bool = False) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    npm_ready()
    if not SUITE.is_file():
        pytest.fail(f"{SUITE} is missing: run `make mcp-deps`")
    process = subprocess.run(
        [
            str(NODE22), str(SUITE), "client",
            "--command", f"{sys.executable} {CLIENT}",
            "--scenario", scenario,
            "--expected-failures", str(BASELINE),
            "--timeout", str(SCENARIO_TIMEOUT_S * 1000 // 2),
            "-o", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        env={**os.environ, "PINCER_CONFORMANCE_LEAN": "1" if lean else "0"},
    )
    results = list(out.glob("*/checks.json"))
    checks = json.loads(results[0].read_text()) if results else []
    return process, checks


@pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])
@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_client_scenario_passes(scenario: str, lean: bool, tmp_path: Path) -> None:
    process, checks = run_scenario(scenario, tmp_path, lean=lean)
    assert process.returncode == 0, process.stderr[-3000:]
    verdicts = [c for c in checks if c["status"] in ("SUCCESS", "FAILURE", "WARNING")]
    assert verdicts and all(c["status"] == "SUCCESS" for c in verdicts), verdicts


def test_unsupported_elicitation_scenario_is_the_known_failure(tmp_path: Path) -> None:
    process, checks = run_scenario("elicitation-sep1034-client-defaults", tmp_path)
    # Exit 0 only because the baseline lists it; its checks fail because pincer asks no one: the
    # call was made by no MCP client, so no person can answer (runtimes/mcp/person_questions.py).
    assert process.returncode == 0, process.stderr[-3000:]
    assert any(
        c["status"] == "FAILURE" and "no person can be asked" in (c.get("errorMessage") or "") for c in checks
    ), checks
