"""MCP Tasks outlive their gateway: real ``pincer serve`` processes on one PostgreSQL. A task
made on one gateway waits for a person; that gateway is killed (SIGKILL); the person answers from
the CLI; the other gateway resumes the call and answers ``tasks/get`` with its result."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx

from pincer.gateway.tokens import load_or_create_token
from tests.backends import postgres_server
from tests.gateway.scale_out_support import SERVER_STOP_TIMEOUT_S, cli, gateways, rows, wait_for

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


def _rpc(url: str, token: str, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    }
    headers = {
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method, "Mcp-Name": name,
    }  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = httpx.post(f"{url}/mcp", headers=headers, content=json.dumps(body), trust_env=False, timeout=60)
    answer: dict[str, Any] = response.json()
    return answer


def test_a_waiting_task_survives_its_gateway_and_is_finished_by_another(tmp_path: Path) -> None:
    url = postgres_server().new_database()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n')
    done = cli(home, "db", "upgrade", "--json")
    assert done.returncode == 0, done.stderr
    token = load_or_create_token(home)
    with gateways([home, home]) as (first, second):
        created = _rpc(first.url, token, "tools/call",
                       {"name": "write_file", "arguments": {"path": "task.txt", "content": "durable"}}, "write_file")  # fmt: skip
        task = created["result"]
        assert task["resultType"] == "task" and task["status"] == "input_required", created
        first.process.send_signal(signal.SIGKILL)
        assert first.process.wait(timeout=SERVER_STOP_TIMEOUT_S) == -signal.SIGKILL
        # The other gateway answers for it, from the store.
        polled = _rpc(second.url, token, "tasks/get", {"taskId": task["taskId"]}, task["taskId"])["result"]
        assert polled["status"] == "input_required" and polled["inputRequests"]
        ((approval_id,),) = rows(url, "SELECT approval_id FROM tasks WHERE id = %s", (task["taskId"],))
        # A person sees it from the CLI, and cancels another one there.
        other = _rpc(second.url, token, "tools/call",
                     {"name": "write_file", "arguments": {"path": "never.txt", "content": "x"}}, "write_file")["result"]  # fmt: skip
        listed = cli(home, "tasks", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert {t["id"]: t["status"] for t in json.loads(listed.stdout)} == {
            task["taskId"]: "input_required",
            other["taskId"]: "input_required",
        }
        cancelled = cli(home, "tasks", "cancel", other["taskId"], "--json")
        assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["status"] == "cancelled", cancelled.stderr
        shown = cli(home, "tasks", "show", task["taskId"], "--json")
        assert json.loads(shown.stdout)["approval_id"] == approval_id
        unknown = cli(home, "tasks", "show", "no-such-task")
        assert unknown.returncode != 0 and "pincer tasks list" in unknown.stderr
        answered = cli(home, "approvals", "approve", approval_id)
        assert answered.returncode == 0, answered.stderr

        def finished() -> dict[str, Any] | None:
            now = _rpc(second.url, token, "tasks/get", {"taskId": task["taskId"]}, task["taskId"])["result"]
            return now if now["status"] not in ("working", "input_required") else None

        result = wait_for("the task to finish on the second gateway", finished, alive=[second])
    assert result["status"] == "completed", result
    assert not result["result"].get("isError"), result
    outcomes = rows(url, "SELECT outcome, args FROM audit WHERE tool = 'write_file' AND kind = 'call' ORDER BY id")
    by_path: dict[str, list[str]] = {}
    for outcome, args in outcomes:
        by_path.setdefault(json.loads(args)["path"], []).append(outcome)
    assert by_path == {"task.txt": ["pending", "ok"], "never.txt": ["pending", "cancelled"]}
    assert not (home / "workspace" / "never.txt").exists()
    assert (home / "workspace" / "task.txt").read_text() == "durable"


def _sleeper_home(tmp_path: Path) -> tuple[Path, str]:
    """A home on a fresh PostgreSQL with a script tool that sleeps; calls become tasks after 0.2 s."""
    url = postgres_server().new_database()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n\n[tasks]\nafter_s = 0.2\n'
    )
    assert cli(home, "db", "upgrade", "--json").returncode == 0
    manifest = tmp_path / "sleeper.toml"
    manifest.write_text(
        'name = "sleeper"\ndescription = "Sleeps a while"\ncommand = ["/bin/sleep", "15"]\n\n'
        '[input_schema]\ntype = "object"\n'
    )
    installed = cli(home, "tools", "install", str(manifest))
    assert installed.returncode == 0, installed.stderr
    return home, url


def test_a_task_running_when_its_gateway_dies_is_failed_never_run_again(tmp_path: Path) -> None:
    home, _ = _sleeper_home(tmp_path)
    token = load_or_create_token(home)
    with gateways([home, home]) as (first, second):
        task = _rpc(first.url, token, "tools/call", {"name": "sleeper", "arguments": {}}, "sleeper")["result"]
        assert task["resultType"] == "task" and task["status"] == "working", task
        first.process.send_signal(signal.SIGKILL)
        assert first.process.wait(timeout=SERVER_STOP_TIMEOUT_S) == -signal.SIGKILL

        def ended() -> dict[str, Any] | None:
            now = _rpc(second.url, token, "tasks/get", {"taskId": task["taskId"]}, task["taskId"])["result"]
            return now if now["status"] != "working" else None

        result = wait_for("the other gateway to fail the interrupted task", ended, alive=[second])
    assert result["status"] == "failed", result
    assert result["error"]["code"] == -32603 and "not run again" in result["error"]["message"]
    assert "not run again" in result["statusMessage"]


def test_cancelling_on_one_gateway_stops_the_call_another_runs(tmp_path: Path) -> None:
    home, url = _sleeper_home(tmp_path)
    token = load_or_create_token(home)
    with gateways([home, home]) as (first, second):
        task = _rpc(first.url, token, "tools/call", {"name": "sleeper", "arguments": {}}, "sleeper")["result"]
        assert task["resultType"] == "task" and task["status"] == "working", task
        acked = _rpc(second.url, token, "tasks/cancel", {"taskId": task["taskId"]}, task["taskId"])
        assert acked["result"]["resultType"] == "complete", acked

        def ended() -> dict[str, Any] | None:
            now = _rpc(second.url, token, "tasks/get", {"taskId": task["taskId"]}, task["taskId"])["result"]
            return now if now["status"] != "working" else None

        result = wait_for("the first gateway to cancel the call", ended, alive=[first, second])
    assert result["status"] == "cancelled", result
    outcomes = rows(url, "SELECT outcome FROM audit WHERE tool = 'sleeper' AND kind = 'call'")
    assert [o for (o,) in outcomes] == ["cancelled"]
