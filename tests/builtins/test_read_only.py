"""``[builtins.github] read_only = true`` leaves no write action in ``pincer tools list``, MCP
``tools/list`` or the definitions an agent run sends its model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.builtins.catalog import bundled_runtime
from pincer.builtins.github import ACTIONS
from pincer.config import parse_config
from pincer.demo.model_server import Turn, serve_models
from pincer.llm import RunRequest
from tests.gateway.conftest import live_gateway
from tests.llm.conftest import llm_config, open_pincer

WRITES = {a.name for a in ACTIONS if a.writes}
READ_ONLY = '[builtins.github]\nenabled = true\nread_only = true\nactions = ["get_repo", "create_issue", "list_issues"]\n'


def _actions_in(schema: Any) -> set[str]:
    return set(schema["properties"]["action"]["enum"])


def test_tools_list_shows_no_write_action(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(READ_ONLY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-m", "pincer.cli", "tools", "list", "--json"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    github = next(t for t in json.loads(done.stdout) if t["name"] == "github")
    assert "external_write" not in github["effects"]
    assert not set(json.dumps(github).split('"')) & WRITES
    shown = subprocess.run([sys.executable, "-m", "pincer.cli", "tools", "show", "github", "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert _actions_in(json.loads(shown.stdout)["input_schema"]) == {"get_repo", "list_issues"}


@pytest.mark.anyio
async def test_mcp_tools_list_shows_no_write_action(tmp_path: Path) -> None:
    async with live_gateway(tmp_path, config=READ_ONLY, extra_runtime=False) as gateway:
        await gateway.pincer.add_runtime(bundled_runtime(parse_config(READ_ONLY, home=tmp_path).builtins))
        async with gateway.mcp() as client:
            tools = {t.name: t for t in (await client.list_tools(cache_mode="bypass")).tools}
    assert _actions_in(tools["github"].input_schema) == {"get_repo", "list_issues"}
    assert "create_issue" not in json.dumps(tools["github"].input_schema)


@pytest.mark.anyio
async def test_a_runs_definitions_hold_no_write_action(tmp_path: Path) -> None:
    with serve_models([Turn(text="nothing to do")]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server, extra=READ_ONLY)) as pincer:
            with anyio.fail_after(60):
                await pincer.agent.run(RunRequest(message="look at the repo"))
    tools = server.requests[0].body["tools"]
    github = next(t["function"] for t in tools if t["function"]["name"] == "github")
    assert _actions_in(github["parameters"]) == {"get_repo", "list_issues"}
    assert not WRITES & set(json.dumps(github).replace("\\n", " ").replace(":", " ").split())
