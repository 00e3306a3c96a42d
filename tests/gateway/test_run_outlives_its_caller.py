"""An agent run outlives its caller (issue 37, "everywhere else a call can wait"): a run started
over REST that hits an approval keeps waiting under its run id after every connection of the
client that started and followed it is closed; a person answers from the CLI (another process);
the run resumes, finishes, and a new connection reads how it ended. A real ``pincer serve``, the
local model server (a real HTTP server speaking the OpenAI API's shapes), the CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm.delegate import run_skill_runtime
from tests.gateway.conftest import live_gateway, pincer_serve
from tests.gateway.test_tasks import Requester
from tests.gateway.ui.conftest import WAIT_S, pincer_cli, wait_until

WRITE_ARGS = {"path": "after-the-caller.txt", "content": "written once the person answered"}


def _config(model_url: str) -> str:
    return f'[llm]\nmodel = "scripted-model"\nbase_url = "{model_url}"\n\n[approvals]\ntimeout_s = 300\n'


def _followed_until_the_approval(http: httpx.Client, run_id: str, api: dict[str, str]) -> dict[str, Any]:
    """Follow the run's events until it asks; then the caller hangs up (the block ends)."""
    with http.stream("GET", f"/api/v1/runs/{run_id}/events", headers=api) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                event: dict[str, Any] = json.loads(line[6:])
                assert event["kind"] != "run" or event.get("status") not in ("done", "error", "cancelled"), event
                if event["kind"] == "approval":
                    return event
    raise AssertionError(f"run {run_id}'s events ended without asking for an approval")


def test_a_run_waiting_for_an_approval_outlives_its_caller_and_finishes_when_answered_from_the_cli(pincer_home: Path) -> None:
    script = [Turn(calls=(ScriptedCall(name="write_file", arguments=WRITE_ARGS),)), Turn(text="Written.")]
    with serve_models(script) as models:
        (pincer_home / "config.toml").write_text(_config(models.openai_url))
        with pincer_serve(pincer_home) as server:
            api = {"Authorization": f"Bearer {server.token}"}
            with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as caller:
                started = caller.post("/api/v1/runs", headers=api, json={"message": "write the file"})
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]
                asked = _followed_until_the_approval(caller, run_id, api)
            # Every connection of the caller is closed now; the run waits on, under its id.
            assert asked["tool"] == "write_file"
            with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as later:
                row = later.get(f"/api/v1/runs/{run_id}", headers=api).json()
                assert row["status"] == "running", row
                pending = json.loads(pincer_cli(pincer_home, "approvals", "list", "--json").stdout)["approvals"]
                assert [(p["id"], p["run_id"]) for p in pending] == [(asked["id"], run_id)]
                assert not (pincer_home / "workspace" / WRITE_ARGS["path"]).exists()
                approved = pincer_cli(pincer_home, "approvals", "approve", asked["id"])
                assert approved.returncode == 0, approved.stderr
                wait_until("the run finishing after the answer",
                           lambda: later.get(f"/api/v1/runs/{run_id}", headers=api).json()["status"] != "running")  # fmt: skip
                ended = later.get(f"/api/v1/runs/{run_id}", headers=api).json()
        assert ended["status"] == "done", ended
        assert ended["messages"][-1]["content"] == "Written."
        assert (pincer_home / "workspace" / WRITE_ARGS["path"]).read_text() == WRITE_ARGS["content"]
        records = json.loads(pincer_cli(pincer_home, "audit", "list", "--json").stdout)
        calls = [r for r in records if r.get("run_id") == run_id and r["tool"] == "write_file" and r["kind"] == "call"]
        assert [r["outcome"] for r in calls] == ["ok"], calls


@pytest.mark.anyio
async def test_a_run_skill_call_made_a_task_waits_for_its_runs_approval_after_the_client_left(tmp_path: Path) -> None:
    # MCP: a client that takes tasks delegates to a skill; the call becomes a task (here at
    # once, [tasks] after_s = 0) and runs in the gateway, not in the client's request. Its run
    # asks for an approval; the client is gone (each request below is a fresh connection); a
    # person answers; the run resumes, and the task completes with the run's answer.
    home = tmp_path / "home"
    folder = home / "skills" / "noter"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: noter\ndescription: Take a note.\ntools: [write_note]\n---\nWrite the note.\n")
    script = [Turn(calls=(ScriptedCall(name="write_note", arguments={"text": "remember"}),)), Turn(text="Noted.")]
    config = '[tasks]\nafter_s = 0\n\n[[grants]]\ntool = "run_skill"\ndefault = "allow"\n'
    with serve_models(script) as models:
        llm = f'[llm]\nmodel = "scripted-model"\nbase_url = "{models.openai_url}"\n\n'
        async with live_gateway(home, config=llm + config) as gateway:
            await gateway.pincer.add_runtime(run_skill_runtime(gateway.pincer.delegate_services()))
            client = Requester(gateway)
            created = (await client.call("run_skill", {"skill": "noter"}))["result"]
            assert created["resultType"] == "task" and created["status"] == "working", created
            with anyio.fail_after(WAIT_S):
                while not (pending := await gateway.pincer.approvals.list_pending()):
                    await anyio.sleep(0.05)
            (approval,) = pending
            assert approval.tool == "write_note" and approval.run_id is not None
            assert (await client.get(created["taskId"]))["result"]["status"] == "working"
            await gateway.pincer.dispatcher.answer(approval.id, "allow_once", by="cli")
            done = await client.until(created["taskId"], "completed", "failed")
            answer = json.loads(done["result"]["content"][0]["text"])
            assert answer["status"] == "done" and answer["text"] == "Noted." and answer["run_id"] == approval.run_id
            calls = [r for r in await gateway.pincer.audit.records(run_id=approval.run_id) if r.kind == "call"]
            assert [(r.tool, r.outcome) for r in calls] == [("write_note", "ok")]
