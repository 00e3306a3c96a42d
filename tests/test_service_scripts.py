"""Script tools wired into the service: installed manifests, exec approvals through the approvals
store, allow-always persisted to exec-approvals.json. Real sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.runtimes.script.installed import install_manifest
from pincer.service import Pincer
from tests.processes import SHOUT_MANIFEST

KEY = b"s" * 32



@pytest.mark.anyio
async def test_installed_manifest_runs_in_the_sandbox(tmp_path: Path) -> None:
    source = tmp_path / "shout.toml"
    source.write_text(SHOUT_MANIFEST)
    home = tmp_path / "home"
    install_manifest(home, source)
    async with Pincer.open(home, secret_key=KEY, external=False) as pincer:
        assert "shout" in pincer.registry
        result = await pincer.call(CallRequest(tool="shout", args={"text": "hello; rm -rf /"}))
    assert result.ok, result.error
    assert result.output["stdout"].strip() == "hello; rm -rf /"  # argv, never a shell
    assert result.usage.extra["backend"] != "host"


@pytest.mark.anyio
async def test_exec_asks_through_the_approval_store_and_remembers_allow_always(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = parse_config('[[grants]]\ntool = "exec"\ndefault = "allow"\n[approvals]\ntimeout_s = 10\n', home=home)
    async with Pincer.open(home, config=config, secret_key=KEY, external=False) as pincer:

        async def answer_when_asked(decision: str) -> None:
            with anyio.fail_after(10):
                while not await pincer.approvals.list_pending():
                    await anyio.sleep(0.02)
            (pending,) = await pincer.approvals.list_pending()
            assert pending.tool == "exec" and "echo" in pending.args["command"]
            await pincer.dispatcher.answer(pending.id, decision, by="test")

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_when_asked, "deny")
            denied = await pincer.call(CallRequest(tool="exec", args={"command": "echo one"}))
        assert denied.error["code"] == "approval_denied"

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_when_asked, "allow_always")
            allowed = await pincer.call(CallRequest(tool="exec", args={"command": "echo two"}))
        assert allowed.ok and allowed.output["stdout"].strip() == "two"

        again = await pincer.call(CallRequest(tool="exec", args={"command": "echo three"}))
        assert again.ok and not await pincer.approvals.list_pending()
    saved = json.loads((home / "exec-approvals.json").read_text())
    assert any("echo" in entry for entry in saved["allowlist"])
