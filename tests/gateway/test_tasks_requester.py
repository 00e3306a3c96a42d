"""The official MCP Tasks requester (``@modelcontextprotocol/ext-tasks``, installed by ``make
mcp-deps``) against a real ``pincer serve``: a call that needs an approval comes back as a task;
the client leaves; a person answers from the CLI (with the gateway restarted in between, in the
second case); a new client's ``tasks/get`` gets the exact result, and one record of the call exists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import pincer_serve
from tests.gateway.scale_out_support import cli

REPO = Path(__file__).resolve().parents[2]
EXT_TASKS = REPO / ".cache" / "npm-ext-tasks" / "node_modules"
NODE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "node"
SCRIPT = Path(__file__).with_name("tasks_requester") / "requester.mjs"
NODE_TIMEOUT_S = 60.0

pytestmark = pytest.mark.skipif(
    not (EXT_TASKS / "@modelcontextprotocol" / "ext-tasks").is_dir() or not NODE.exists(),
    reason="`make mcp-deps` installs @modelcontextprotocol/ext-tasks and Node 22",
)


@pytest.fixture
def requester(tmp_path: Path) -> Path:
    """The script beside a node_modules that holds ext-tasks (ESM resolves from the script's place)."""
    place = tmp_path / "requester"
    place.mkdir()
    (place / "node_modules").symlink_to(EXT_TASKS)
    shutil.copy(SCRIPT, place / "requester.mjs")
    return place / "requester.mjs"


def _node(script: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(NODE), str(script), *args], capture_output=True, text=True, timeout=NODE_TIMEOUT_S,
        env={k: v for k, v in os.environ.items() if not k.startswith("NODE_")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _approval_of(home: Path, task_id: str) -> str:
    shown = cli(home, "tasks", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    approval_id: str = json.loads(shown.stdout)["approval_id"]
    return approval_id


def _calls(home: Path) -> list[dict[str, Any]]:
    listed = cli(home, "audit", "list", "--tool", "write_file", "--json")
    assert listed.returncode == 0, listed.stderr
    return [r for r in json.loads(listed.stdout) if r.get("kind", "call") == "call"]


@pytest.mark.parametrize("restart", [False, True], ids=["same-gateway", "gateway-restarted"])
def test_the_official_requester_gets_the_result_of_an_approved_task(
    pincer_home: Path, requester: Path, restart: bool
) -> None:
    args = json.dumps({"path": "from-ext-tasks.txt", "content": "approved"})
    with pincer_serve(pincer_home) as server:
        made = _node(requester, "call", server.info["url"], server.token, "write_file", args)
        if not restart:
            assert made["kind"] == "task", made
            task_id = made["reference"]["taskId"]
            cli(pincer_home, "approvals", "approve", _approval_of(pincer_home, task_id))
            result = _node(requester, "result", server.info["url"], server.token, json.dumps(made["reference"]))
    if restart:
        assert made["kind"] == "task", made
        approval_id = _approval_of(pincer_home, made["reference"]["taskId"])
        with pincer_serve(pincer_home) as server:
            answered = cli(pincer_home, "approvals", "approve", approval_id)
            assert answered.returncode == 0, answered.stderr
            result = _node(requester, "result", server.info["url"], server.token, json.dumps(made["reference"]))
    assert not result.get("isError"), result
    records = _calls(pincer_home)
    assert [r["outcome"] for r in records] == ["pending", "ok"]
    assert result["_meta"]["pincer/auditId"] == records[-1]["id"]
    assert (pincer_home / "workspace" / "from-ext-tasks.txt").read_text() == "approved"
