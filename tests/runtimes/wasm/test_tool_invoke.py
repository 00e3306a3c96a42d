"""``tool-invoke`` goes through the whole call chain under the calling session: aliases only,
session policy and grants apply, nesting is depth-limited, every nested call is audited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pincer.config import load_config
from pincer.core.values import CallRequest
from pincer.service import Pincer

pytestmark = pytest.mark.anyio

CONFIG = """
[[grants]]
tool = "*"
default = "allow"

[sessions.main]
kind = "main"
deny = ["spin"]

[tools]
max_depth = 3
"""

ALIASES = {"tool_invoke": {"aliases": {"say": "echo", "busy": "spin", "me": "secret_echo", "ghost": "nothing"}}}


@pytest.fixture
async def pincer(pincer_home: Path, wasm_runtime, wasm_components, tmp_path: Path):
    (pincer_home / "config.toml").write_text(CONFIG)
    runtime = await wasm_runtime({"echo": None, "spin": None, "secret_echo": ALIASES})
    async with Pincer.open(pincer_home, config=load_config(pincer_home), builtins=False, wasm=False) as service:
        await service.add_runtime(runtime)
        yield service


async def call(pincer: Pincer, args: dict, session: str = "main"):
    result = await pincer.call(CallRequest(tool="secret_echo", args=args, session=session, caller="test"))
    assert result.ok, result.error
    return result.output


async def test_an_alias_reaches_its_tool_through_the_chain(pincer: Pincer):
    out = await call(pincer, {"alias": "say", "alias_params": {"message": "via alias"}})
    assert out["invoke"] == {"message": "via alias"}
    (nested,) = await pincer.audit.records(tool="echo")
    assert (nested.caller, nested.session, nested.outcome) == ("secret_echo", "main", "ok")
    (outer,) = await pincer.audit.records(tool="secret_echo")
    assert outer.caller == "test" and outer.id > nested.id  # the child is recorded first


async def test_policy_applies_to_nested_calls(pincer: Pincer):
    out = await call(pincer, {"alias": "busy", "alias_params": {"n": 3}})
    assert "invoke" not in out
    assert out["invoke_error"].startswith("busy: denied:")
    (denied,) = await pincer.audit.records(tool="spin")
    assert denied.outcome == "denied" and denied.caller == "secret_echo"


async def test_only_declared_aliases_and_real_tools_are_reachable(pincer: Pincer):
    out = await call(pincer, {"alias": "echo", "alias_params": {}})  # a real name is not an alias
    assert out["invoke_error"] == "alias 'echo' is not in tool_invoke.aliases of secret_echo"
    out = await call(pincer, {"alias": "ghost", "alias_params": {}})
    assert out["invoke_error"].startswith("ghost: tool_not_found:")


async def test_nesting_is_depth_limited(pincer: Pincer):
    # secret_echo invoking itself: each level asks the next to do the same
    params: dict = {"alias": "me", "alias_params": {}}
    innermost = params
    for _ in range(6):
        innermost["alias_params"] = {"alias": "me", "alias_params": {}}
        innermost = innermost["alias_params"]
    out = await call(pincer, params)
    depth = 0
    node = out
    while "invoke" in node:
        node = node["invoke"]
        depth += 1
    assert depth == 3  # main (depth 0) -> 1 -> 2 -> 3, the fourth level is refused
    assert "deeper than" in node["invoke_error"]
    assert json.dumps(out).count("invoke_error") == 1


async def test_a_nested_call_carries_the_runs_taint_and_run(pincer_home: Path, wasm_runtime, tmp_path: Path):
    """A tainted run's WASM tool invokes a tool that sends (``external_write``). Before issue 34
    the child call was built without the run's taint or run id: it ran where the run's own call
    would have been refused (failed at ``result.output["invoke_error"]``: the post was sent), and
    the audit did not name the run. Taint and run follow the call chain down."""
    from pincer.core.values import Taint
    from pincer.runtimes.native.decorator import tool
    from pincer.runtimes.native.runtime import NativeRuntime

    posted: list[str] = []

    @tool(name="post", effects=("external_write",))
    async def post(text: str) -> str:
        """Send text somewhere."""
        posted.append(text)
        return "sent"

    (pincer_home / "config.toml").write_text(CONFIG)
    runtime = await wasm_runtime({"secret_echo": {"tool_invoke": {"aliases": {"send": "post"}}}})
    async with Pincer.open(pincer_home, config=load_config(pincer_home), builtins=False, wasm=False) as service:
        await service.add_runtime(runtime)
        await service.add_runtime(NativeRuntime([post], name="senders"))
        taint = Taint(tool="http", mode="deny", what="the output of http (a hostile page)")
        request = CallRequest(tool="secret_echo", args={"alias": "send", "alias_params": {"text": "the notes"}}, caller="agent", run_id="run-1", taint=taint)
        result = await service.call(request)
        assert result.ok, result.error
        assert result.output["invoke_error"].startswith("send: denied:"), result.output
        assert posted == []
        (nested,) = await service.audit.records(tool="post")
        assert nested.outcome == "denied" and nested.run_id == "run-1" and "taint" in nested.reason
