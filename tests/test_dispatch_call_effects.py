"""The chain reads a call's own effects: grants, taint, approvals ("allow always") and the audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.values import CallEffects, CallRequest, Taint
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime

KEY = b"k" * 32
READ = frozenset({E.NETWORK})
WRITE = frozenset({E.NETWORK, E.EXTERNAL_WRITE})
ACTIONS = CallEffects(arg="action", table={"get": READ, "create": WRITE})
SCHEMA = {"type": "object", "properties": {"action": {"type": "string"}}}


async def _ok(args, host):
    return f"did {args.get('action')}"


@pytest.fixture
async def pincer(tmp_path: Path):
    config = parse_config(
        """
[approvals]
timeout_s = 2
[[grants]]
tool = "api"
effects = { network = "allow" }
""",
        home=tmp_path,
    )
    runtime = FuncRuntime()
    runtime.add("api", _ok, effects=WRITE, side_effecting=True, schema=SCHEMA, call_effects=ACTIONS)
    runtime.add("api2", _ok, effects=WRITE, side_effecting=True, schema=SCHEMA, call_effects=ACTIONS)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as p:
        await p.add_runtime(runtime)
        yield p


def _taint() -> Taint:
    return Taint(tool="http", audit_id=1, mode="ask")


@pytest.mark.anyio
async def test_a_grant_for_reads_lets_reads_run_and_keeps_writes_asking(pincer: Pincer) -> None:
    read = await pincer.call(CallRequest(tool="api", args={"action": "get"}))
    assert read.ok, read.error
    asked: list[tuple[str, ...]] = []

    async def deny(approval):
        asked.append(approval.effects)
        await pincer.dispatcher.answer(approval.id, "deny", by="test")

    write = await pincer.call(CallRequest(tool="api", args={"action": "create"}), on_approval=deny)
    assert write.error["code"] == "approval_denied"
    assert asked == [("external_write", "network")]
    # A value the table does not know is decided as the tool's whole set: it asks too.
    unknown = await pincer.call(CallRequest(tool="api", args={"action": "creat"}), on_approval=deny)
    assert unknown.error["code"] == "approval_denied" and len(asked) == 2
    records = [r for r in await pincer.audit.records() if r.tool == "api"]
    calls = [r.effects for r in records if r.kind == "call"]
    assert calls[0] == ["network"] and calls[1] == ["external_write", "network"]  # each call's own


@pytest.mark.anyio
async def test_a_cached_read_decision_never_answers_a_write(pincer: Pincer) -> None:
    for _ in range(3):
        assert (await pincer.call(CallRequest(tool="api", args={"action": "get"}))).ok
    write = await pincer.call(CallRequest(tool="api", args={"action": "create"}))
    assert write.error["code"] == "approval_timeout"


@pytest.mark.anyio
async def test_taint_reads_the_calls_effects(pincer: Pincer) -> None:
    read = await pincer.call(CallRequest(tool="api", args={"action": "get"}, taint=_taint()))
    assert read.ok, read.error  # a read after untrusted input is no trifecta step
    deny_mode = Taint(tool="http", audit_id=1, mode="deny")
    write = await pincer.call(CallRequest(tool="api", args={"action": "create"}, taint=deny_mode))
    assert write.error["code"] == "denied" and "external_write" in write.error["message"]


@pytest.mark.anyio
async def test_allow_always_on_a_read_records_a_grant_for_reads_only(pincer: Pincer) -> None:
    async def always(approval):
        await pincer.dispatcher.answer(approval.id, "allow_always", by="test")

    first = await pincer.call(CallRequest(tool="api2", args={"action": "get"}), on_approval=always)
    assert first.ok, first.error
    again = await pincer.call(CallRequest(tool="api2", args={"action": "get"}))
    assert again.ok, again.error  # the recorded grant answers the read
    write = await pincer.call(CallRequest(tool="api2", args={"action": "create"}))
    assert write.error["code"] == "approval_timeout"  # ...and not the write
