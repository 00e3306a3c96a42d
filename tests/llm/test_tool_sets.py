"""Large tool sets (find_tools, load_tools) and provider-safe tool names."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from pincer.llm.names import SAFE_NAME, ToolNames
from pincer.llm.tool_search import ToolIndex, one_line
from tests.funcruntime import FuncRuntime
from tests.llm.conftest import llm_config, open_pincer

VERBS = ["create", "get", "list", "update", "delete", "search", "merge", "close"]
NOUNS = ["issue", "pull_request", "comment", "branch", "release", "label", "milestone", "workflow"]


async def _done(args, host):
    return {"done": True, "args": args}


def _github_like() -> FuncRuntime:
    runtime = FuncRuntime()
    for verb in VERBS:
        for noun in NOUNS:
            runtime.add(f"gh.{noun}_{verb}", _done)
            runtime.specs[f"gh.{noun}_{verb}"] = runtime.specs[f"gh.{noun}_{verb}"].__class__(
                name=f"gh.{noun}_{verb}", description=f"{verb.title()} a {noun.replace('_', ' ')} in a GitHub repository.",
                input_schema={"type": "object", "properties": {"repo": {"type": "string", "description": "owner/name"}}},
                effects=frozenset(), runtime=runtime.specs[f"gh.{noun}_{verb}"].runtime, side_effecting=False, source="test",
            )  # fmt: skip
    return runtime


@pytest.mark.anyio
async def test_past_the_threshold_the_model_finds_and_loads_tools_instead_of_getting_all(tmp_path: Path) -> None:
    script = [
        Turn(calls=(ScriptedCall(name="find_tools", arguments={"query": "create an issue", "limit": 3}),)),
        Turn(calls=(ScriptedCall(name="load_tools", arguments={"names": ["gh_issue_create", "no_such_tool"]}),)),
        Turn(calls=(ScriptedCall(name="gh_issue_create", arguments={"repo": "acme/app"}),)),
        Turn(text="opened"),
    ]
    with serve_models(script) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            runtime = _github_like()
            await pincer.add_runtime(runtime)
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message="open an issue in acme/app"))
            assert run.status == "done"
            assert sorted(server.requests[0].tool_names) == ["find_tools", "load_tools", "skill"]
            found = json.loads(server.requests[1].body["messages"][-1]["content"].split("\n", 1)[1].rsplit("\n", 1)[0])
            assert found["tools"][0]["name"] == "gh_issue_create" and len(found["tools"]) == 3
            assert "gh_issue_create" in server.requests[3].tool_names
            loaded = json.loads(server.requests[2].body["messages"][-1]["content"].split("\n", 1)[1].rsplit("\n", 1)[0])
            assert loaded == {"loaded": ["gh_issue_create"], "unknown": ["no_such_tool"]}
            assert runtime.calls["gh.issue_create"] == 1
            audited = [r.tool for r in await pincer.audit.records(run_id=run.id) if r.kind == "call"]
            assert audited == ["gh.issue_create"]  # find_tools and load_tools run in the loop, not as tools


@pytest.mark.anyio
async def test_below_the_threshold_every_definition_is_sent_with_safe_names(tmp_path: Path) -> None:
    with serve_models([Turn(calls=(ScriptedCall(name="gh_issue_get", arguments={}),)), Turn(text="ok")]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server, extra="[agent]\nmax_tool_definitions = 200\n")) as pincer:
            runtime = _github_like()
            await pincer.add_runtime(runtime)
            run = await pincer.agent.run(RunRequest(message="x"))
            names = server.requests[0].tool_names
            assert "find_tools" not in names and "gh_issue_get" in names and len(names) > 64
            assert all(SAFE_NAME.match(n) for n in names)
            assert run.status == "done" and runtime.calls["gh.issue_get"] == 1


@pytest.mark.anyio
async def test_a_tool_the_run_does_not_offer_is_a_tool_error(tmp_path: Path) -> None:
    with serve_models([Turn(calls=(ScriptedCall(name="rm_rf", arguments={}),)), Turn(text="ok")]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            run = await pincer.agent.run(RunRequest(message="x"))
            assert run.status == "done"
            answer = server.requests[1].body["messages"][-1]["content"]
            assert "no tool named 'rm_rf' is offered" in answer


def test_names_are_kept_when_safe_and_mapped_without_collisions() -> None:
    long = "x" * 100
    names = ToolNames(["echo", "a.b", "a_b", "skill.lint", long, "x" * 101, "find_tools"], reserved=["find_tools"])
    assert names.safe("echo") == "echo" and names.safe("a_b") == "a_b"
    assert names.safe("a.b") != "a_b" and names.safe("a.b").startswith("a_b_")
    assert names.safe(long) != names.safe("x" * 101)
    assert names.real(names.safe("find_tools")) == "find_tools"
    for real in ["echo", "a.b", "a_b", "skill.lint", long, "x" * 101]:
        assert SAFE_NAME.match(names.safe(real)) and names.real(names.safe(real)) == real


@given(st.lists(st.text(min_size=1, max_size=130), min_size=1, max_size=40, unique=True))
def test_any_set_of_names_maps_one_to_one_onto_safe_names(reals: list[str]) -> None:
    names = ToolNames(reals, reserved=["find_tools", "load_tools"])
    safes = [names.safe(r) for r in reals]
    assert len(set(safes)) == len(safes)
    assert all(SAFE_NAME.match(s) for s in safes)
    assert all(names.real(names.safe(r)) == r for r in reals)
    assert not {"find_tools", "load_tools"} & (set(safes) - {r for r in reals if r in ("find_tools", "load_tools")})


def test_the_index_ranks_names_descriptions_and_schemas() -> None:
    index = ToolIndex([
        ("github_create_issue", "Open a new issue in a repository.", {"properties": {"title": {"description": "issue title"}}}),
        ("slack_post_message", "Post a message to a Slack channel.", {"properties": {"channel": {}}}),
        ("calendar_create_event", "Create an event.", {"properties": {"attendees": {"description": "who is invited"}}}),
    ])  # fmt: skip
    assert index.search("create issue")[0].name == "github_create_issue"
    assert index.search("invite attendees")[0].name == "calendar_create_event"
    assert index.search("postMessage slack")[0].name == "slack_post_message"
    assert index.search("unrelated words") == []
    assert one_line("First sentence. Second one.") == "First sentence."


@pytest.mark.anyio
async def test_the_offered_tools_are_the_skills_intersected_with_what_the_session_may_call(tmp_path: Path) -> None:
    from tests.llm.conftest import write_skill

    home = tmp_path / "home"
    write_skill(home, "mixed", "---\nname: mixed\ndescription: d\ntools: [echo, write_file, http, \"gh.*\"]\n---\nDo it.\n")
    extra = '[sessions.bot]\nkind = "non-main"\nallow = ["echo", "skill", "gh.issue_*"]\n'
    with serve_models([Turn(text="ok")]) as server:
        async with open_pincer(home, llm_config(server, extra=extra)) as pincer:
            await pincer.add_runtime(_github_like())
            run = await pincer.agent.run(RunRequest(skill="mixed", session="bot"))
            assert run.status == "done" and run.session == "bot"
            offered = sorted(server.requests[0].tool_names)
            assert offered == sorted(["echo", "skill", *(f"gh_issue_{v}" for v in VERBS)])
