"""The whole call chain against real SQLite files, with a small in-test runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.values import CallRequest
from pincer.service import Pincer
from pincer.store import ApprovalStatus
from tests.funcruntime import FuncRuntime

KEY = b"k" * 32
SECRET = "sk-live-planted-secret-value-1234"

async def _echo(args, host):
    return args.get("text", "")


async def _leak(args, host):
    return {"header": f"Authorization: token {SECRET}", "list": [SECRET]}


async def _boom(args, host):
    raise RuntimeError("kaput")


async def _slow(args, host):
    await anyio.sleep(10)


async def _big(args, host):
    return "x" * 300_000


async def _nested(args, host):
    result = await host.invoke(CallRequest(tool="nested", args={}))
    return result.to_dict()


@pytest.fixture
async def pincer(tmp_path: Path):
    config = parse_config(
        """
[approvals]
timeout_s = 2
[tools]
timeout_s = 0.5
max_depth = 3
[[grants]]
tool = "net_allowed"
effects = { network = "allow" }
hosts = ["api.example.com"]
[[grants]]
tool = "denied_tool"
default = "deny"
[[grants]]
tool = "capped"
default = "allow"
max_invocations = 2
[sessions.restricted]
kind = "non-main"
allow = ["echo"]
[limits.limited]
calls_per_minute = 2
""",
        home=tmp_path,
    )
    runtime = FuncRuntime()
    runtime.add("echo", _echo)
    runtime.add("leak", _leak)
    runtime.add("boom", _boom)
    runtime.add("slow", _slow)
    runtime.add("big", _big)
    runtime.add("nested", _nested)
    runtime.add("limited", _echo)
    runtime.add("net_allowed", _echo, effects=[E.NETWORK])
    runtime.add("asks", _echo, effects=[E.WRITE_FILESYSTEM], side_effecting=True)
    runtime.add("denied_tool", _echo, effects=[E.NETWORK])
    runtime.add("capped", _echo, effects=[E.NETWORK])
    runtime.add("writer", _echo, effects=[], side_effecting=True)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as p:
        p.secrets.set("planted", SECRET)
        await p.add_runtime(runtime)
        p.test_runtime = runtime  # type: ignore[attr-defined]
        yield p


async def call(p: Pincer, tool: str, args: Any = None, **kw):
    return await p.call(CallRequest(tool=tool, args={} if args is None else args, **kw))


@pytest.mark.anyio
async def test_allowed_call_is_audited(pincer: Pincer) -> None:
    result = await call(pincer, "echo", {"text": "hi"})
    assert result.ok and result.output == "hi" and result.audit_id == 1
    record = (await pincer.audit.records())[-1]
    assert (record.tool, record.decision, record.outcome) == ("echo", "allow", "ok")
    assert await pincer.audit.verify() == 1


@pytest.mark.anyio
async def test_unknown_tool_and_invalid_args_are_audited(pincer: Pincer) -> None:
    missing = await call(pincer, "nope")
    assert missing.error["code"] == "tool_not_found" and missing.audit_id
    bad = await call(pincer, "echo", {"text": 5})
    assert bad.error["code"] == "invalid_arguments"
    assert 'args.text: 5 is not of type "string" (rule: type)' in bad.error["message"]
    assert pincer.test_runtime.calls["echo"] == 0
    long_key = await call(pincer, "writer", {}, idempotency_key="k" * 257)
    assert long_key.error["code"] == "usage_error" and "256" in long_key.error["message"]
    outcomes = [(r.tool, r.outcome, r.error_code) for r in await pincer.audit.records()]
    assert outcomes == [
        ("nope", "error", "tool_not_found"),
        ("echo", "error", "invalid_arguments"),
        ("writer", "error", "usage_error"),
    ]


@pytest.mark.anyio
async def test_session_and_grant_denials(pincer: Pincer) -> None:
    result = await call(pincer, "leak", session="restricted")
    assert result.error["code"] == "denied" and "allow list" in result.error["message"]
    assert (await call(pincer, "echo", {"text": "x"}, session="restricted")).ok
    denied = await call(pincer, "denied_tool")
    assert denied.error["code"] == "denied" and "network" in denied.error["message"]
    stranger = await call(pincer, "echo", {"text": "x"}, session="some-channel")
    assert stranger.error["code"] == "denied"  # unconfigured sessions get the sandbox default
    assert pincer.test_runtime.calls["denied_tool"] == 0
    assert [r.outcome for r in await pincer.audit.records()] == ["denied", "ok", "denied", "denied"]


@pytest.mark.anyio
async def test_grant_hosts_reach_the_runtime(pincer: Pincer) -> None:
    seen: list[Any] = []

    async def capture(args, host):
        seen.append(host.network_hosts)
        return "ok"

    pincer.test_runtime.funcs["net_allowed"] = capture
    assert (await call(pincer, "net_allowed")).ok
    assert seen == [("api.example.com",)]


@pytest.mark.anyio
async def test_ask_allow_once_then_allow_always(pincer: Pincer) -> None:
    asked: list[str] = []

    async def answer(approval, decision):
        asked.append(approval.id)
        assert approval.tool == "asks" and approval.effects == ("write_filesystem",)
        await pincer.dispatcher.answer(approval.id, decision, by="test")

    once = await pincer.call(
        CallRequest(tool="asks", args={"text": "1"}), on_approval=lambda a: answer(a, "allow_once")
    )
    assert once.ok and len(asked) == 1
    always = await pincer.call(
        CallRequest(tool="asks", args={"text": "2"}), on_approval=lambda a: answer(a, "allow_always")
    )
    assert always.ok and len(asked) == 2
    third = await pincer.call(CallRequest(tool="asks", args={"text": "3"}), on_approval=lambda a: answer(a, "deny"))
    assert third.ok and len(asked) == 2  # the recorded grant answers now
    kinds = [(r.kind, r.decision) for r in await pincer.audit.records()]
    assert ("approval", "allow_once") in kinds and ("approval", "allow_always") in kinds
    assert await pincer.audit.verify() == len(kinds)


@pytest.mark.anyio
async def test_ask_denied_and_timed_out(pincer: Pincer) -> None:
    denied = await pincer.call(
        CallRequest(tool="asks", args={}),
        on_approval=lambda a: _answer_later(pincer, a.id, "deny"),
    )
    assert denied.error["code"] == "approval_denied"
    timed_out = await call(pincer, "asks", {})
    assert timed_out.error["code"] == "approval_timeout" and "within 2 s" in timed_out.error["message"]
    assert pincer.test_runtime.calls["asks"] == 0
    assert [r.status for r in await pincer.approvals.list(status=None)] == [ApprovalStatus.DENY, ApprovalStatus.EXPIRED]


async def _answer_later(p: Pincer, approval_id: str, decision: str) -> None:
    await p.dispatcher.answer(approval_id, decision, by="test")


@pytest.mark.anyio
async def test_rate_limit_says_when_to_retry(pincer: Pincer) -> None:
    assert (await call(pincer, "limited", {"text": "a"})).ok
    assert (await call(pincer, "limited", {"text": "b"})).ok
    third = await call(pincer, "limited", {"text": "c"})
    assert third.error["code"] == "budget_exceeded"
    assert 0 < third.error["retry_after_s"] <= 60
    assert "retry in" in third.error["hint"]


@pytest.mark.anyio
async def test_max_invocations_then_falls_back_to_asking(pincer: Pincer) -> None:
    assert (await call(pincer, "capped")).ok
    assert (await call(pincer, "capped")).ok
    third = await pincer.call(CallRequest(tool="capped", args={}), on_approval=lambda a: _answer_later(pincer, a.id, "deny"))
    assert third.error["code"] == "approval_denied"
    assert "used all 2" in (await pincer.approvals.list(status=None))[-1].reason


@pytest.mark.anyio
async def test_idempotency_replays_and_folds_concurrent_duplicates(pincer: Pincer) -> None:
    runs = 0

    async def counting(args, host):
        nonlocal runs
        runs += 1
        await anyio.sleep(0.05)
        return {"run": runs}

    pincer.test_runtime.funcs["writer"] = counting
    results = []

    async def one() -> None:
        results.append(await call(pincer, "writer", {"text": "x"}, idempotency_key="order-1"))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert runs == 1
    assert sorted(r.cached for r in results) == [False, True, True, True, True]
    assert all(r.output == {"run": 1} for r in results)
    again = await call(pincer, "writer", {"text": "x"}, idempotency_key="order-1")
    assert again.cached and runs == 1
    conflict = await call(pincer, "writer", {"text": "other"}, idempotency_key="order-1")
    assert conflict.error["code"] == "idempotency_conflict"
    fresh = await call(pincer, "writer", {"text": "x"}, idempotency_key="order-2")
    assert not fresh.cached and runs == 2
    assert sum(r.cached for r in await pincer.audit.records()) == 5


@pytest.mark.anyio
async def test_secrets_never_leave_in_output_error_or_audit(pincer: Pincer) -> None:
    result = await call(pincer, "leak", {"text": SECRET})
    assert result.ok
    assert SECRET not in str(result.output)
    assert result.usage.redactions >= 2
    record = (await pincer.audit.records())[-1]
    assert SECRET not in str(record.to_dict())
    db = (pincer.home / "pincer.db").read_bytes() + (pincer.home / "pincer.db-wal").read_bytes()
    assert SECRET.encode() not in db


@pytest.mark.anyio
async def test_failures_timeouts_and_truncation(pincer: Pincer) -> None:
    boom = await call(pincer, "boom")
    assert boom.error["code"] == "tool_error" and "RuntimeError" in boom.error["message"]
    slow = await call(pincer, "slow")
    assert slow.error["code"] == "tool_timeout" and "0.5 s" in slow.error["message"]
    big = await call(pincer, "big")
    assert big.ok and big.usage.truncated and len(big.output) < 110_000
    assert "truncated" in big.output


@pytest.mark.anyio
async def test_nested_invocation_is_depth_limited(pincer: Pincer) -> None:
    result = await call(pincer, "nested")
    text = str(result.output)
    assert "nesting deeper than 3" in text
    assert len(await pincer.audit.records(tool="nested")) == 5  # depth 0..3 ran, depth 4 refused


@pytest.mark.anyio
async def test_a_cancelled_call_is_still_audited(pincer: Pincer) -> None:
    with anyio.move_on_after(0.05):
        await call(pincer, "slow")
    (record,) = await pincer.audit.records(tool="slow")
    assert record.outcome == "cancelled" and "cancelled by its caller" in record.error
    assert await pincer.audit.verify() == 1
