"""What the call chain does for the agent loop: run ids in the audit log, the taint rule, and
``[idempotency] required``. Real SQLite files, a small in-test runtime."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.values import CallRequest, Taint
from pincer.service import Pincer
from pincer.store import Answer
from pincer.store.sql import Sql
from tests.funcruntime import FuncRuntime

KEY = b"k" * 32


async def _ok(args, host):
    return "sent"


async def _open(tmp_path: Path, extra: str = ""):
    config = parse_config(
        """
[approvals]
timeout_s = 5
[[grants]]
tool = "send_email"
default = "allow"
[[grants]]
tool = "lookup"
default = "allow"
"""
        + extra,
        home=tmp_path,
    )
    runtime = FuncRuntime()
    runtime.add("send_email", _ok, effects=[E.EXTERNAL_WRITE], side_effecting=True)
    runtime.add("lookup", _ok, effects=[E.NETWORK])
    runtime.add("note", _ok, effects=[E.WRITE_FILESYSTEM], side_effecting=True)
    return config, runtime


@pytest.mark.anyio
async def test_a_run_id_is_recorded_in_the_audit_record_and_chained(tmp_path: Path) -> None:
    config, runtime = await _open(tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, audit_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)
        result = await pincer.call(CallRequest(tool="lookup", args={}, caller="agent", run_id="run-1"))
        assert result.ok
        await pincer.call(CallRequest(tool="lookup", args={}))
        records = await pincer.audit.records(run_id="run-1")
        assert [r.id for r in records] == [result.audit_id] and records[0].caller == "agent"
        assert (await pincer.audit.records())[-1].run_id is None
        assert await pincer.audit.verify() == 2
        # Clearing (or moving) the run id breaks the chain at that record.
        await pincer.db.execute(Sql("UPDATE audit SET run_id = NULL WHERE id = :id"), {"id": result.audit_id})
        from pincer.core.errors import AuditChainBroken

        with pytest.raises(AuditChainBroken) as info:
            await pincer.audit.verify()
        assert info.value.record_id == result.audit_id


@pytest.mark.anyio
async def test_a_tainted_call_with_a_sensitive_effect_asks_although_a_grant_allows_it(tmp_path: Path) -> None:
    config, runtime = await _open(tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, audit_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)
        # Untainted, the grant allows it without asking.
        assert (await pincer.call(CallRequest(tool="send_email", args={}))).ok
        asked = []

        async def deny(approval):
            asked.append(approval)
            await pincer.dispatcher.answer(approval.id, Answer.DENY, by="test")

        taint = Taint(tool="http", audit_id=41, call_id="call_1", mode="ask")
        result = await pincer.call(
            CallRequest(tool="send_email", args={}, caller="agent", run_id="r", taint=taint), on_approval=deny
        )
        assert not result.ok and result.error["code"] == "approval_denied"
        assert len(asked) == 1
        reason = asked[0].reason
        assert "untrusted" in reason and "the output of http (audit record 41)" in reason and "external_write" in reason
        assert runtime.calls["send_email"] == 1
        # A tool without a sensitive effect is not held up by the taint.
        assert (await pincer.call(CallRequest(tool="lookup", args={}, taint=taint))).ok
        # write_filesystem is not one of the effects the rule names; its grant decides (ask).
        assert "untrusted" not in (pincer.dispatcher._grant_decision(runtime.specs["note"], await pincer.dispatcher._all_grants(), "main", runtime.specs["note"].effects).reason)


@pytest.mark.anyio
async def test_taint_deny_refuses_without_asking_and_says_how_to_be_asked(tmp_path: Path) -> None:
    config, runtime = await _open(tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, audit_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)

        async def never(approval):
            raise AssertionError("a deny must not ask")

        taint = Taint(tool="http", audit_id=7, mode="deny")
        result = await pincer.call(CallRequest(tool="send_email", args={}, taint=taint), on_approval=never)
        assert result.error["code"] == "denied"
        assert "the output of http (audit record 7)" in result.error["message"]
        assert '[agent] taint = "ask"' in result.error["hint"]
        assert runtime.calls["send_email"] == 0
        assert (await pincer.audit.records())[-1].outcome == "denied"


@pytest.mark.anyio
async def test_idempotency_required_refuses_a_side_effecting_call_without_a_key(tmp_path: Path) -> None:
    config, runtime = await _open(tmp_path, "[idempotency]\nrequired = true\n")
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, audit_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)
        refused = await pincer.call(CallRequest(tool="send_email", args={}, caller="mcp"))
        assert refused.error["code"] == "idempotency_key_required"
        assert '_meta["pincer/idempotencyKey"]' in refused.error["hint"]
        rest = await pincer.call(CallRequest(tool="send_email", args={}, caller="rest"))
        assert "Idempotency-Key" in rest.error["hint"]
        assert runtime.calls["send_email"] == 0
        # With a key it runs, once; a call without effects on the world needs none.
        first = await pincer.call(CallRequest(tool="send_email", args={}, idempotency_key="k1"))
        again = await pincer.call(CallRequest(tool="send_email", args={}, idempotency_key="k1"))
        assert first.ok and again.ok and again.cached and runtime.calls["send_email"] == 1
        assert (await pincer.call(CallRequest(tool="lookup", args={}))).ok


@pytest.mark.anyio
async def test_idempotency_is_not_required_by_default(tmp_path: Path) -> None:
    config, runtime = await _open(tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, audit_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)
        with anyio.fail_after(10):
            assert (await pincer.call(CallRequest(tool="send_email", args={}))).ok
