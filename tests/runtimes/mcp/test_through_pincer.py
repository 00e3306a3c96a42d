"""MCP tools through the whole call chain: Pincer.open loads the servers under PINCER_HOME. The
chain's guarantees (the leak scan, the audit record, pinned definitions) are checked on both paths
of ``tools/call``: the SDK's client session and the lean path ([tools] mcp_lean_calls)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.runtimes.mcp import ServerStore
from pincer.runtimes.mcp.lean import FIRST_ID
from pincer.secrets.store import SecretStore
from pincer.service import Pincer
from tests.runtimes.mcp.conftest import WAIT_S, faulty_config

pytestmark = pytest.mark.anyio

KEY = bytes(range(32))
SECRET = "sk-live-7f3a9c1e55b2d4480a6b"


BOTH_PATHS = pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])


def open_pincer(home: Path, grants: str = '[[grants]]\ntool = "f_*"\ndefault = "allow"\n', *, lean: bool = False):
    config = parse_config(grants + f"[tools]\ntimeout_s = 10\nmcp_lean_calls = {str(lean).lower()}\n", home=home)
    return Pincer.open(home, config=config, secret_key=KEY, builtins=False)


async def call(p: Pincer, tool: str, args: dict | None = None):
    with anyio.fail_after(WAIT_S):
        return await p.call(CallRequest(tool=tool, args=args or {}, caller="test"))


@BOTH_PATHS
async def test_calls_results_errors_and_the_leak_scan(lean: bool, tmp_path: Path) -> None:
    config = faulty_config("f", "--secret-env", "UPSTREAM_TOKEN", env={"UPSTREAM_TOKEN": "${secret:upstream}"})
    ServerStore(tmp_path).add(config)
    with SecretStore.open(tmp_path, key=KEY) as store:
        store.set("upstream", SECRET)
    async with open_pincer(tmp_path, lean=lean) as p:
        assert {"f_echo", "f_mixed", "f_env"} <= {s.name for s in p.registry.list()}
        request_id = int((await call(p, "f_request_id")).output)
        assert (request_id >= FIRST_ID) is lean, "the call did not take the path under test"
        result = await call(p, "f_echo", {"text": "hello"})
        assert result.ok and result.output == "hello" and result.audit_id is not None
        mixed = await call(p, "f_mixed")
        assert mixed.ok and mixed.output == {"answer": 42}
        assert [b["type"] for b in mixed.content] == ["text", "image", "audio", "resource", "resource_link"]
        failed = await call(p, "f_fail")
        assert not failed.ok and failed.error["code"] == "tool_error" and failed.error["message"] == "it went wrong"
        assert failed.content[0]["text"] == "it went wrong"
        bad = await call(p, "f_echo", {"text": 3})
        assert not bad.ok and bad.error["code"] == "invalid_arguments"
        # The server echoes the secret it was given: the scan removes it from value and content.
        leaked = await call(p, "f_env")
        assert leaked.ok
        assert SECRET not in json.dumps(leaked.output) and SECRET not in json.dumps(leaked.content)
        assert leaked.usage.redactions >= 1
        for db_file in tmp_path.glob("pincer.db*"):  # the audit log, WAL included
            assert SECRET.encode() not in db_file.read_bytes()


async def test_default_policy_asks_and_a_denial_never_reaches_the_server(tmp_path: Path) -> None:
    ServerStore(tmp_path).add(faulty_config("f"))
    async with open_pincer(tmp_path, grants="") as p:
        asked: list[str] = []

        async def deny(approval) -> None:
            asked.append(approval.tool)
            await p.dispatcher.answer(approval.id, "deny", by="test")

        with anyio.fail_after(WAIT_S):
            result = await p.call(CallRequest(tool="f_delete_all", args={}), on_approval=deny)
        assert asked == ["f_delete_all"]
        assert not result.ok and result.error["code"] == "approval_denied"
        assert p.registry.get("f_delete_all").annotations["destructive"] is True


@BOTH_PATHS
async def test_a_changed_definition_is_blocked_live_in_the_registry(lean: bool, tmp_path: Path) -> None:
    ServerStore(tmp_path).add(faulty_config("f"))
    async with open_pincer(tmp_path, lean=lean) as p:
        events = []
        p.registry.subscribe(events.append)
        assert (await call(p, "f_set_description", {"text": "new words"})).ok
        with anyio.fail_after(WAIT_S):
            while "blocked" not in p.registry.get("f_echo").annotations:
                await anyio.sleep(0.01)
        result = await call(p, "f_echo", {"text": "x"})
        assert not result.ok and result.error["code"] == "denied"
        assert "pincer mcp trust f echo" in result.error["hint"]


async def test_a_server_that_fails_to_start_gives_a_clear_error_result(tmp_path: Path) -> None:
    ServerStore(tmp_path).add(faulty_config("f"))
    async with open_pincer(tmp_path):
        pass  # pins recorded
    ServerStore(tmp_path).add(faulty_config("f", command=str(tmp_path / "gone")), replace_existing=True)
    async with open_pincer(tmp_path) as p:
        assert "f_echo" in p.registry  # known from the pins, started lazily
        result = await call(p, "f_echo", {"text": "x"})
        assert not result.ok and result.error["code"] == "runtime_unavailable"
        assert "cannot run" in result.error["message"] and os.fspath(tmp_path / "gone") in result.error["message"]


async def test_a_changed_definition_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    """Newcomer item 3. Failed on main before the fix: a person was asked to approve a call of an
    MCP tool whose changed definition then refused it."""
    description = tmp_path / "description.txt"
    description.write_text("Echo the text back")
    ServerStore(tmp_path).add(faulty_config("f", "--description-file", str(description)))
    async with open_pincer(tmp_path):
        pass  # pinned as it is now
    description.write_text("EVIL: deletes everything")  # the server changes between starts
    async with open_pincer(tmp_path, grants="") as p:  # every call would ask
        asked: list[str] = []

        async def record(approval) -> None:
            asked.append(approval.id)

        with anyio.fail_after(WAIT_S):
            result = await p.call(CallRequest(tool="f_echo", args={"text": "x"}), on_approval=record)
        assert result.error["code"] == "denied" and "pincer mcp trust f echo" in result.error["hint"]
        assert asked == [] and await p.approvals.list(status=None) == []


async def test_a_server_list_edited_by_another_process_keeps_unchanged_servers_running(tmp_path: Path) -> None:
    """Newcomer item 1: `pincer mcp add` from another process reaches a running pincer; the
    servers whose entry did not change are not restarted."""
    ServerStore(tmp_path).add(faulty_config("f"))
    grants = '[[grants]]\ntool = "*"\ndefault = "allow"\n'
    async with open_pincer(tmp_path, grants=grants) as p:
        before = (await call(p, "f_pid")).output
        ServerStore(tmp_path).add(faulty_config("g"))  # what `pincer mcp add g ...` writes
        await p.reload_mcp_servers()
        assert "g_echo" in p.registry
        assert (await call(p, "g_echo", {"text": "new"})).ok
        assert (await call(p, "f_pid")).output == before  # not restarted
        ServerStore(tmp_path).remove("f")
        await p.reload_mcp_servers()
        assert "f_pid" not in p.registry and "g_echo" in p.registry
