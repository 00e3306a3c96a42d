"""A hostile agent against the call chain itself: approvals, idempotency, output and progress.

Each test names the hardening item (issue 9) it guards and what main did before the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.errors import ApprovalGone, Denied
from pincer.core.values import CallRequest, ToolOutput
from pincer.service import Pincer
from pincer.store import ApprovalStatus
from tests.funcruntime import FuncRuntime, RecordingClient

pytestmark = pytest.mark.anyio

KEY = b"c" * 32
SECRET = "sk-live-chain-attack-secret-0042"
CONFIG = """
[approvals]
timeout_s = 10
[tools]
timeout_s = 0.5
[sessions.ci-bot]
kind = "non-main"
allow = ["*"]
[sessions.other-bot]
kind = "non-main"
allow = ["*"]
"""


async def _echo(args: dict[str, Any], host: Any) -> Any:
    return args.get("text", "")


async def _key_material(args: dict[str, Any], host: Any) -> Any:
    return {"key": f"material-for-{args.get('text')}"}


async def _huge_content(args: dict[str, Any], host: Any) -> Any:
    text = "x" * 5_000_000
    return ToolOutput(value=text, content=({"type": "text", "text": text},))


async def _progress_leak(args: dict[str, Any], host: Any) -> Any:
    await host.client.progress(0.5, 1.0, f"token={SECRET}")
    await host.client.log("info", f"using {SECRET}")
    return "done"


@pytest.fixture
async def pincer(tmp_path: Path):
    runtime = FuncRuntime()
    runtime.add("write_thing", _echo, effects=[E.WRITE_FILESYSTEM], side_effecting=True)
    runtime.add("mint", _key_material, side_effecting=True)
    runtime.add("huge", _huge_content)
    runtime.add("chatty", _progress_leak)
    config = parse_config(CONFIG, home=tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False, scripts=False, wasm=False) as p:
        p.secrets.set("planted", SECRET)
        await p.add_runtime(runtime)
        yield p


async def _wait_pending(p: Pincer):
    with anyio.fail_after(10):
        while not await p.approvals.list_pending():
            await anyio.sleep(0.02)
    return (await p.approvals.list_pending())[0]


async def test_a_non_main_session_cannot_answer_approvals(pincer: Pincer) -> None:
    """Item 1. Failed on main before the fix: only REST refused a non-main answerer; the
    dispatcher (which MCP elicitation answers go through) accepted ci-bot's allow_always for its
    own call."""
    results = []

    async def call() -> None:
        results.append(await pincer.call(CallRequest(tool="write_thing", args={"text": "a"}, session="ci-bot")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        pending = await _wait_pending(pincer)
        assert pending.session_kind == "non-main"
        with pytest.raises(Denied, match="not a main session"):
            await pincer.dispatcher.answer(pending.id, "allow_always", by="mcp-elicitation:ci-bot", as_session="ci-bot")
        assert (await pincer.approvals.get(pending.id)).status is ApprovalStatus.PENDING
        await pincer.dispatcher.answer(pending.id, "allow_once", by="rest:main", as_session="main")
    assert results[0].ok
    assert not await pincer.grants.all()


async def test_allow_always_is_scoped_to_the_kind_of_session_that_asked(pincer: Pincer) -> None:
    """Item 1. Failed on main before the fix: an allow_always answer made a grant for the tool in
    every session, so approving ci-bot's call also unlocked it for everyone else."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(pincer.call, CallRequest(tool="write_thing", args={"text": "a"}, session="ci-bot"))
        pending = await _wait_pending(pincer)
        await pincer.dispatcher.answer(pending.id, "allow_always", by="cli")
    (grant,) = await pincer.grants.all()
    assert grant.sessions == ("kind:non-main",)
    # Another non-main session is covered now ...
    other = await pincer.call(CallRequest(tool="write_thing", args={"text": "b"}, session="other-bot"))
    assert other.ok
    # ... the main session is not: it is asked again.
    async with anyio.create_task_group() as tg:
        tg.start_soon(pincer.call, CallRequest(tool="write_thing", args={"text": "c"}, session="main"))
        pending = await _wait_pending(pincer)
        assert pending.session == "main"
        # The answerer widens on purpose: every session.
        await pincer.dispatcher.answer(pending.id, "allow_always", by="cli", scope="all")
    assert any(g.sessions is None for g in await pincer.grants.all())


async def test_an_approval_whose_call_is_gone_cannot_be_answered(pincer: Pincer) -> None:
    """Item 4 / newcomer item 2. Failed on main before the fix: an approval outlived its call and
    answering it later succeeded although nobody was waiting."""
    with anyio.move_on_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pincer.call, CallRequest(tool="write_thing", args={"text": "a"}))
            pending = await _wait_pending(pincer)
            tg.cancel_scope.cancel()  # the caller goes away
    assert (await pincer.approvals.get(pending.id)).status is ApprovalStatus.EXPIRED
    with pytest.raises(ApprovalGone, match="expired"):
        await pincer.dispatcher.answer(pending.id, "allow_once", by="cli")
    record = (await pincer.audit.records())[-1]
    assert record.approval_id == pending.id and record.outcome == "cancelled"


async def test_idempotency_keys_do_not_cross_sessions(pincer: Pincer) -> None:
    """Item 7. Failed on main before the fix: ci-bot reusing main's key with the same args got
    main's cached result (its key material), and with other args a conflict that revealed it."""
    mine = await pincer.call(CallRequest(tool="mint", args={"text": "main"}, session="main", idempotency_key="k-1"))
    assert mine.ok and not mine.cached
    replay = await pincer.call(CallRequest(tool="mint", args={"text": "main"}, session="ci-bot", idempotency_key="k-1"))
    assert replay.ok and not replay.cached  # ran afresh for ci-bot, nothing of main's came back
    other = await pincer.call(CallRequest(tool="mint", args={"text": "bot"}, session="ci-bot", idempotency_key="k-2"))
    assert other.ok
    clash = await pincer.call(CallRequest(tool="mint", args={"text": "x"}, session="ci-bot", idempotency_key="k-1"))
    assert clash.error["code"] == "idempotency_conflict"
    assert "main" not in clash.error["message"]
    again = await pincer.call(CallRequest(tool="mint", args={"text": "main"}, session="main", idempotency_key="k-1"))
    assert again.cached and again.output == mine.output


async def test_one_output_limit_covers_content_blocks(pincer: Pincer) -> None:
    """Item 12. Failed on main before the fix: a 5,000,000-character result was cut in `output`
    but its MCP content block went out whole."""
    result = await pincer.call(CallRequest(tool="huge", args={}))
    assert result.ok and result.usage.truncated
    limit = pincer.config.max_output_bytes
    assert len(result.output.encode()) <= limit
    assert result.content is not None
    assert sum(len(str(block.get("text", "")).encode()) for block in result.content) <= limit
    assert "truncated" in result.content[-1]["text"]


async def test_progress_and_log_text_is_leak_scanned(pincer: Pincer) -> None:
    """Item 9 (the chain's part). Failed on main before the fix: report_progress text from a tool
    reached the client unscanned."""
    client = RecordingClient()
    result = await pincer.call(CallRequest(tool="chatty", args={}, client=client))
    assert result.ok
    assert len(client.messages) == 2
    assert all(SECRET not in message for message in client.messages)
    assert all("REDACTED" in message for message in client.messages)


async def test_an_exec_approval_waits_the_approval_timeout_not_the_tool_timeout(tmp_path: Path) -> None:
    """Item 4. Failed on main before the fix: the exec ask waited inside the tool's deadline, so
    the approval died at tools.timeout_s (not approvals.timeout_s) and stayed
    pending and answerable after the call had failed."""
    home = tmp_path / "home"
    config = parse_config(
        '[approvals]\ntimeout_s = 20\n[tools]\ntimeout_s = 5\n[[grants]]\ntool = "exec"\ndefault = "allow"\n', home=home
    )
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False) as p:
        results = []

        async def call() -> None:
            results.append(await p.call(CallRequest(tool="exec", args={"command": "echo approved"})))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            pending = await _wait_pending(p)
            assert pending.reason.startswith("exec approval:") and pending.detail["command"] == "echo approved"
            assert set(pending.effects) >= {"execute_code", "spawn_process"}
            await anyio.sleep(6)  # past the tool timeout: the approval still waits
            assert (await p.approvals.get(pending.id)).status is ApprovalStatus.PENDING
            await p.dispatcher.answer(pending.id, "allow_once", by="cli")
        (result,) = results
        assert result.ok, result.error
        assert result.output["stdout"].strip() == "approved"
        calls = [r for r in await p.audit.records(tool="exec") if r.kind == "call"]
        assert [r.approval_id for r in calls] == [pending.id]


async def test_a_refused_exec_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    """Newcomer item 3 (refuse before asking), exec's part: a command the exec policy denies
    never becomes an approval request."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "exec-approvals.json").write_text('{"security": "allowlist", "ask": "off", "allowlist": ["/usr/bin/ls"]}')
    config = parse_config('[[grants]]\ntool = "exec"\ndefault = "ask"\n', home=home)
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False) as p:
        result = await p.call(CallRequest(tool="exec", args={"command": "id"}))
        assert result.error["code"] == "denied" and "exec refused" in result.error["message"]
        assert await p.approvals.list(status=None) == []


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1/admin", "https://169.254.169.254/latest/meta-data/", "http://example.com/", "https://localhost/"],
)
async def test_an_http_call_the_egress_rule_refuses_is_refused_before_anyone_is_asked(tmp_path: Path, url: str) -> None:
    """Newcomer item 3. Failed on main before the fix: a person was asked to approve an http call
    that the egress check then refused (a private address)."""
    home = tmp_path / "home"
    async with Pincer.open(home, secret_key=KEY, external=False, scripts=False, wasm=False) as p:
        result = await p.call(CallRequest(tool="http", args={"url": url}))
        assert result.error["code"] == "egress_denied", result.error
        assert await p.approvals.list(status=None) == []
