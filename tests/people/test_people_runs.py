"""The person on runs and tasks: a run a person starts with their token (REST, the ``run_skill``
MCP tool) names them on the run and on every audit record it writes; "Run again" (REST and the
dashboard) is the asker's run, never the first run's person's; a task a person's call became
carries on as theirs when its approval is answered (its records name them, and who answered).
A real gateway on 127.0.0.1:0 and the local model server."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.effects import EffectKind
from pincer.core.values import CallRequest, HostContext
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm.delegate import run_skill_runtime
from pincer.policy.roles import parse_roles
from pincer.runtimes.native import NativeRuntime, tool
from pincer.service import Pincer
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio
RUN_TIMEOUT_S = 90.0
POLL_S = 0.05


def _config(server: Any) -> str:
    return f'[llm]\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n\n[[grants]]\ntool = "run_skill"\ndefault = "allow"\n'


def _say(text: str) -> list[Turn]:
    return [Turn(calls=(ScriptedCall(name="say", arguments={"text": text}),)), Turn(text="Said.")]


async def _person(pincer: Pincer, name: str, *roles: str) -> dict[str, str]:
    await pincer.people.add(name, roles=parse_roles(list(roles)), email=None, by="test", now=time.time())
    made = await pincer.people.new_token(name, now=time.time())
    return {"Authorization": f"Bearer {made.value}"}


async def _ended(gateway: LiveGateway, run_id: str) -> None:
    with anyio.fail_after(RUN_TIMEOUT_S):
        while not (await gateway.pincer.runs.get(run_id)).is_final:
            await anyio.sleep(POLL_S)


async def _people_of_run(gateway: LiveGateway, run_id: str) -> list[tuple[str, str | None]]:
    return [(r.kind, r.person) for r in await gateway.pincer.audit.records(run_id=run_id)]


async def test_a_run_is_its_starters_and_run_again_is_the_askers_on_rest_and_the_dashboard(tmp_path: Path) -> None:
    with serve_models(_say("one") + _say("two") + _say("three")) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway, gateway.http() as http:
            ann = await _person(gateway.pincer, "ann", "operator")
            gina = await _person(gateway.pincer, "gina", "viewer")
            started = await http.post("/api/v1/runs", headers=ann, json={"message": "say one"})
            assert started.status_code == 202, started.text
            first = started.json()["run_id"]
            await _ended(gateway, first)
            assert (await http.get(f"/api/v1/runs/{first}", headers=ann)).json()["person"] == "ann"
            assert await _people_of_run(gateway, first) == [("run", "ann"), ("call", "ann"), ("run", "ann")]

            again = await http.post(f"/api/v1/runs/{first}/rerun", headers=gina)
            assert again.status_code == 202, again.text
            second = again.json()["run_id"]
            await _ended(gateway, second)
            row = await gateway.pincer.runs.get(second)
            assert (row.person, row.message, row.trigger) == ("gina", "say one", "rest")
            assert await _people_of_run(gateway, second) == [("run", "gina"), ("call", "gina"), ("run", "gina")]
            assert (await gateway.pincer.runs.get(first)).person == "ann"  # the first run stays ann's

            # The dashboard's Run again: gina signed in, the new run is hers.
            form = await http.get("/ui/login")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
            assert csrf is not None
            token = gina["Authorization"].removeprefix("Bearer ")
            signed = await http.post("/ui/login", data={"token": token, "csrf_token": csrf.group(1)})
            assert signed.status_code == 303, signed.text
            page = await http.get(f"/ui/runs/{first}")
            assert "Run again" in page.text and "<dd>ann</dd>" in page.text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
            assert csrf is not None
            assert (await http.post(f"/ui/runs/{first}/rerun", data={})).status_code in (403, 415)  # no CSRF token
            rerun = await http.post(f"/ui/runs/{first}/rerun", data={"csrf_token": csrf.group(1)})
            assert rerun.status_code == 303, rerun.text
            third = rerun.headers["location"].rsplit("/", 1)[1]
            await _ended(gateway, third)
            row = await gateway.pincer.runs.get(third)
            assert (row.person, row.trigger) == ("gina", "dashboard")
            assert await _people_of_run(gateway, third) == [("run", "gina"), ("call", "gina"), ("run", "gina")]
            # A run nobody's token started names no one.
            plain = await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "x"})
            assert plain.status_code == 202
            await _ended(gateway, plain.json()["run_id"])
            assert (await gateway.pincer.runs.get(plain.json()["run_id"])).person is None


async def test_run_skill_over_mcp_with_a_persons_token_runs_for_that_person(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "workspace" / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greet someone.\ntools: [say]\n---\nGreet the user with say.\n")
    with serve_models(_say("hello")) as server:
        async with live_gateway(home, config=_config(server)) as gateway:
            await gateway.pincer.add_runtime(run_skill_runtime(gateway.pincer.delegate_services()))
            olga = await _person(gateway.pincer, "olga", "operator")
            async with gateway.mcp(mode="legacy", token=olga["Authorization"].removeprefix("Bearer ")) as client:
                with anyio.fail_after(RUN_TIMEOUT_S):
                    result = await client.call_tool("run_skill", {"skill": "greet", "message": "greet me"})
            assert not result.is_error, result
            run_id = json.loads(result.content[0].text)["run_id"]
            assert (await gateway.pincer.runs.get(run_id)).person == "olga"
            assert await _people_of_run(gateway, run_id) == [("run", "olga"), ("call", "olga"), ("run", "olga")]


async def test_a_task_a_persons_call_became_carries_on_as_theirs_when_another_answers(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home") as gateway, gateway.http() as http:
        vera = await _person(gateway.pincer, "vera", "viewer")
        wes = await _person(gateway.pincer, "wes", "approver:tool=write_*")
        made = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "hers"}},
                               headers={**vera, "Prefer": "respond-async"})  # fmt: skip
        assert made.status_code == 202, made.text
        task = made.json()
        assert task["person"] == "vera"
        answered = await http.post(f"/api/v1/approvals/{task['approval_id']}", json={"decision": "allow_once"}, headers=wes)
        assert answered.status_code == 200, answered.text
        with anyio.fail_after(RUN_TIMEOUT_S):
            while (await gateway.pincer.tasks.get(task["id"])).status.value not in ("completed", "failed"):
                await anyio.sleep(POLL_S)
        calls = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
        # The call asked (pending), then ran when wes answered: both records are vera's.
        assert [(r.person, r.approved_by, r.outcome) for r in calls] == [("vera", None, "pending"), ("vera", "rest:wes", "ok")]
        assert [r.id for r in await gateway.pincer.audit.records(person="wes") if r.kind == "call"] == [calls[1].id]





async def test_a_run_skill_inside_a_persons_call_acts_for_that_person(tmp_path: Path) -> None:
    """Issue 41, item 3: ``run_skill`` called inside a call (a tool of gina's call invoking it
    through the chain, one level deeper) starts a run that is gina's, as is every call it makes."""
    @tool(name="delegate", effects=[EffectKind.DISPATCH_CAPABILITY])
    async def delegate(host: HostContext) -> dict[str, Any]:
        """Delegate the greeting to a skill run, through the chain."""
        assert host.invoke is not None
        result = await host.invoke(CallRequest(tool="run_skill", args={"skill": "greet", "message": "greet me"}))
        assert result.ok, result.error
        return dict(result.output)  # type: ignore[arg-type]

    home = tmp_path / "home"
    folder = home / "workspace" / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greet someone.\ntools: [say]\n---\nGreet the user with say.\n")
    config = '[[grants]]\ntool = "delegate"\ndefault = "allow"\n'
    with serve_models(_say("hello")) as server:
        async with live_gateway(home, config=_config(server) + config) as gateway, gateway.http() as http:
            await gateway.pincer.add_runtime(run_skill_runtime(gateway.pincer.delegate_services()))
            await gateway.pincer.add_runtime(NativeRuntime([delegate], name="test-delegate"))
            gina = await _person(gateway.pincer, "gina", "operator")
            answer = await http.post("/api/v1/tools/delegate/call", headers=gina, json={"args": {}})
            assert answer.status_code == 200, answer.text
            (inner,) = await gateway.pincer.runs.list()
            assert inner.person == "gina" and inner.trigger == "run_skill"
            assert await _people_of_run(gateway, inner.id) == [("run", "gina"), ("call", "gina"), ("run", "gina")]
            calls = [(r.tool, r.person) for r in await gateway.pincer.audit.records() if r.kind == "call"]
            assert ("run_skill", "gina") in calls and ("delegate", "gina") in calls
