"""Issue 20 items 7 and 8: who may read or start a skill holds on every path.

Item 7. ``disable-model-invocation: true`` kept a skill out of the catalog only: on main the
model-facing ``skill`` tool returned its whole body (over MCP ``tools/call`` and REST alike),
``run_skill`` ran it, and MCP ``resources/read`` and the skills extension handed it to the
client's model. ``user-invocable: false`` stopped ``/nouser`` only: on main ``POST
/api/v1/runs {"skill": "nouser"}`` started it, so did ``pincer run nouser`` and a cron job.

Item 8. On main a non-main token whose session policy withholds the ``skill`` tool still got
every skill through MCP ``prompts/list|get``, ``resources/list|read`` and ``skills/list``;
and ``resources/read`` of a skill file hard-linked to ``config.toml`` returned the config (a
symlink out was refused, a hard link was not).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from pincer.cli.serve import gateway_extensions
from pincer.config import parse_config
from pincer.core.errors import Denied
from pincer.gateway.serve import ServeInfo, serve
from pincer.gateway.tokens import token_digest
from pincer.llm.run import RunRequest
from pincer.service import Pincer
from pincer.triggers.requests import TriggerKind
from tests.gateway.conftest import PINCER_BIN, SECRET_KEY, SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S, LiveGateway
from tests.skills.conftest import write_skill

pytestmark = pytest.mark.anyio

BOT_TOKEN = "pcr_ci_bot_token_for_the_skill_visibility_suite"
CONFIG = f"""
[sessions.ci-bot]
kind = "non-main"
allow = ["say"]
[[gateway.tokens]]
sha256 = "{token_digest(BOT_TOKEN)}"
session = "ci-bot"
"""
SECRET_BODY = "NOMODEL-BODY-7f3a: only a person may start this."
CLI_TIMEOUT_S = 120


def _skills(home: Path) -> None:
    root = home / "workspace" / "skills"
    write_skill(root, "nomodel", "disable-model-invocation: true", SECRET_BODY + "\n")
    write_skill(root, "nouser", "user-invocable: false", "NOUSER-BODY: background knowledge.\n")
    write_skill(root, "plain", "", "PLAIN-BODY\n")


@asynccontextmanager
async def skills_gateway(home: Path, config: str = CONFIG) -> AsyncIterator[LiveGateway]:
    """A real gateway on 127.0.0.1:0 with the skills' MCP extensions, as ``pincer serve`` has them."""
    parsed = parse_config(config, home=home)
    async with Pincer.open(home, config=parsed, secret_key=SECRET_KEY, builtins=False, external=False, wasm=False) as pincer:
        extensions = await gateway_extensions(pincer)
        ready: list[ServeInfo] = []
        started = anyio.Event()

        def on_ready(info: ServeInfo) -> None:
            ready.append(info)
            started.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await serve(pincer, settings=parsed.gateway, host="127.0.0.1", port=0, on_ready=on_ready, extensions=extensions)

            tg.start_soon(run)
            with anyio.fail_after(SERVER_START_TIMEOUT_S):
                await started.wait()
            token = (home / "gateway.token").read_text().strip()
            try:
                yield LiveGateway(pincer=pincer, info=ready[0], token=token)
            finally:
                with anyio.move_on_after(SERVER_STOP_TIMEOUT_S):
                    tg.cancel_scope.cancel()


# -- item 7: disable-model-invocation ----------------------------------------------------------


async def test_the_skill_tool_refuses_a_skill_models_may_not_invoke(pincer_home: Path) -> None:
    """On main the ``skill`` tool returned SECRET_BODY over REST and MCP tools/call."""
    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        async with live.http(headers=live.headers) as http:
            rest = await http.post("/api/v1/tools/skill/call", json={"args": {"name": "nomodel"}})
            plain = await http.post("/api/v1/tools/skill/call", json={"args": {"name": "plain"}})
        async with live.mcp() as client:
            mcp = await client.call_tool("skill", {"name": "nomodel"})
        catalog = live.pincer.skills.catalog().text
    assert rest.status_code == 403, rest.text
    assert "disable-model-invocation" in rest.json()["error"]["message"]
    assert SECRET_BODY not in rest.text
    assert plain.status_code == 200 and "PLAIN-BODY" in plain.text
    assert mcp.is_error and SECRET_BODY not in str(mcp.content)
    assert "nomodel" not in catalog and "plain" in catalog


async def test_run_skill_refuses_a_skill_models_may_not_invoke(pincer_home: Path) -> None:
    """run_skill is another agent asking (trigger "run_skill"): on main it rendered and ran the skill."""
    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        with pytest.raises(Denied, match="disable-model-invocation"):
            await live.pincer.agent.open_run(RunRequest(skill="nomodel", trigger="run_skill"))


async def test_mcp_hands_a_person_only_skill_to_people_not_to_models(pincer_home: Path) -> None:
    """Prompts are what a person picks: ``nomodel`` stays one. Resources and the skills extension
    go to the client's model: on main they served ``nomodel``'s SKILL.md."""
    from fastmcp import Client as FastMCPClient
    from fastmcp.skills import SkillsClientExtension

    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        async with live.mcp() as client:
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            person = await client.get_prompt("nomodel")
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            with pytest.raises(MCPError):
                await client.read_resource("skill://nomodel/SKILL.md")
            with pytest.raises(MCPError):
                await client.get_prompt("nouser")
        async with FastMCPClient(live.info.mcp_url, auth=live.token, extensions=[SkillsClientExtension()]) as fast:
            entries = {e.uri for e in await fast.list_skills()}
    assert "nomodel" in prompts and "nouser" not in prompts and "plain" in prompts
    assert SECRET_BODY in person.messages[0].content.text
    assert "skill://nomodel/SKILL.md" not in resources and "skill://plain/SKILL.md" in resources
    assert "skill://nomodel/SKILL.md" not in entries and "skill://plain/SKILL.md" in entries
    assert "skill://nouser/SKILL.md" in entries  # a model may load a user-invocable: false skill


# -- item 7: user-invocable: false -------------------------------------------------------------


async def test_rest_runs_and_commands_refuse_a_skill_people_may_not_start(pincer_home: Path) -> None:
    """On main POST /api/v1/runs {"skill": "nouser"} was accepted (202) and the run started."""
    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        async with live.http(headers=live.headers) as http:
            run = await http.post("/api/v1/runs", json={"skill": "nouser"})
            command = await http.post("/api/v1/commands", json={"text": "/nouser"})
            listed = (await http.get("/api/v1/commands")).json()
        runs = await live.pincer.runs.list() if hasattr(live.pincer, "runs") else []
    assert run.status_code == 403, run.text
    assert "user-invocable: false" in run.json()["error"]["message"]
    assert command.status_code == 404, command.text
    assert "/nouser" not in {c["command"] for c in listed["commands"]}
    assert not [r for r in runs if getattr(r, "skill", None) == "nouser"]


async def test_a_cron_job_naming_a_skill_people_may_not_start_is_refused(pincer_home: Path) -> None:
    """A schedule or webhook is set up by a person: on main its firing was queued to run. The
    skill's own schedule (job ``skill:NAME``) still fires."""
    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        firing = await live.pincer.triggers.fire(
            kind=TriggerKind.SCHEDULE, name="nightly", fired_by="scheduler", skill="nouser", params={}, message=None,
            session="main",
        )  # fmt: skip
        own = await live.pincer.triggers.fire(
            kind=TriggerKind.SCHEDULE, name="skill:nouser", fired_by="scheduler", skill="nouser", params={}, message=None,
            session="main",
        )  # fmt: skip
    assert firing.status == "error"
    assert "user-invocable: false" in str(firing.to_dict().get("error"))
    assert own.status == "queued"  # the skill's own schedule (triggers: schedule in its SKILL.md) is its design


def test_pincer_run_refuses_a_skill_people_may_not_start(pincer_home: Path) -> None:
    """On main ``pincer run nouser`` went on to the model (and failed only for want of one)."""
    _skills(pincer_home)
    env = {**os.environ, "PINCER_HOME": str(pincer_home)}
    done = subprocess.run(
        [str(PINCER_BIN), "run", "nouser", "--json"],
        capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "user-invocable: false" in done.stdout + done.stderr


# -- item 8: the session policy and the files -------------------------------------------------


async def test_a_session_that_may_not_see_the_skill_tool_sees_no_skill_over_mcp(pincer_home: Path) -> None:
    """On main ci-bot (allow = ["say"]) listed and read every skill through prompts and resources,
    and started skill runs (whose transcript carries the skill's text) over REST."""
    from fastmcp import Client as FastMCPClient
    from fastmcp.skills import SkillsClientExtension

    _skills(pincer_home)
    async with skills_gateway(pincer_home) as live:
        async with live.mcp(token=BOT_TOKEN) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            with pytest.raises(MCPError):
                await client.get_prompt("plain")
            with pytest.raises(MCPError):
                await client.read_resource("skill://plain/SKILL.md")
            with pytest.raises(MCPError):
                await client.get_prompt("review")  # the /review command's prompt
        async with FastMCPClient(live.info.mcp_url, auth=BOT_TOKEN, extensions=[SkillsClientExtension()]) as fast:
            entries = await fast.list_skills()
        async with live.http(headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as http:
            commands = (await http.get("/api/v1/commands")).json()["commands"]
            command = await http.post("/api/v1/commands", json={"text": "/plain"})
            run = await http.post("/api/v1/runs", json={"skill": "plain"})
        async with live.mcp() as main:
            main_prompts = {p.name for p in (await main.list_prompts()).prompts}
    assert "skill" not in tools
    assert prompts == set() and resources == [] and entries == [] and commands == []
    assert command.status_code == 403 and run.status_code == 403, (command.text, run.text)
    assert "withholds the skill tool" in run.json()["error"]["message"]
    assert {"plain", "nomodel"} <= main_prompts  # the main session still sees them


async def test_resources_read_refuses_a_hard_link_to_the_config(pincer_home: Path) -> None:
    """On main skill://plain/notes.md, a hard link to $PINCER_HOME/config.toml, was listed and
    read (a symlink out was already refused); the skill tool listed it among the files too."""
    _skills(pincer_home)
    config = pincer_home / "config.toml"
    config.write_text(config.read_text() if config.exists() else "" + "# SECRET-CONFIG-LINE\n")
    folder = pincer_home / "workspace" / "skills" / "plain"
    os.link(config, folder / "notes.md")
    (folder / "outside.md").symlink_to(config)
    (folder / "fine.md").write_text("a plain file\n")
    async with skills_gateway(pincer_home) as live:
        async with live.mcp() as client:
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            for name in ("notes.md", "outside.md"):
                with pytest.raises(MCPError):
                    await client.read_resource(f"skill://plain/{name}")
            fine = await client.read_resource("skill://plain/fine.md")
            described = await client.call_tool("skill", {"name": "plain"})
    assert "skill://plain/fine.md" in resources
    assert "skill://plain/notes.md" not in resources and "skill://plain/outside.md" not in resources
    assert fine.contents[0].text == "a plain file\n"
    files = _files_of(described)
    assert "fine.md" in files and "notes.md" not in files and "outside.md" not in files


def _files_of(result: Any) -> set[str]:
    import json

    data = result.structured_content or json.loads(result.content[0].text)
    value = data.get("result", data) if isinstance(data, dict) else data
    return {f["path"] for f in value["files"]}
