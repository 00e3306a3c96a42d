"""The store seam's contract, run on both backends (SQLite and PostgreSQL: tests/store/conftest.py).

Two stores made from one backend stand for two processes (two gateways) on the same state.
"""

from __future__ import annotations

import itertools

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import (
    ApprovalAnswered,
    ApprovalTimeout,
    AuditChainBroken,
    IdempotencyConflict,
    RunNotFound,
    StoreError,
)
from pincer.policy.grants import Grant
from pincer.store import AuditEntry
from pincer.store.approvals import ApprovalStatus
from pincer.store.grants import RECHECK_INTERVAL_S
from tests.store.conftest import Backend


def entry(i: int, **kw: object) -> AuditEntry:
    base: dict[str, object] = {"session": "main", "caller": "test", "tool": f"t{i % 3}", "decision": "allow",
                               "reason": "r", "outcome": "ok", "args": {"i": i}}  # fmt: skip
    base.update(kw)
    return AuditEntry(**base)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_two_writers_append_concurrently_onto_one_chain(backend: Backend) -> None:
    first, second = await backend.audit(), await backend.audit()
    ids: list[int] = []

    async def one(log: object, i: int) -> None:
        ids.append(await log.append(entry(i)))  # type: ignore[attr-defined]

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(one, first if i % 2 else second, i)
    assert sorted(ids) == list(range(1, 61))
    assert await first.verify() == 60 and await second.verify() == 60
    records = await first.records()
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(records))
    assert await first.append(entry(99)) == 61 and await second.verify() == 61


@pytest.mark.anyio
async def test_an_altered_record_is_named(backend: Backend) -> None:
    log = await backend.audit()
    for i in range(6):
        await log.append(entry(i))
    backend.tamper("UPDATE audit SET reason = 'nothing to see' WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 4 and "altered" in info.value.message


@pytest.mark.anyio
async def test_a_deleted_record_is_named(backend: Backend) -> None:
    log = await backend.audit()
    for i in range(6):
        await log.append(entry(i))
    backend.tamper("DELETE FROM audit WHERE id = 3")
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 3 and "missing" in info.value.message


@pytest.mark.anyio
async def test_a_cut_tail_with_the_head_moved_to_match_fails_on_the_head_mac(backend: Backend) -> None:
    log = await backend.audit()
    for i in range(6):
        await log.append(entry(i))
    last_hash = (await log.records())[3].hash
    backend.tamper("DELETE FROM audit WHERE id > 4")
    backend.tamper("UPDATE audit_head SET last_id = 4, last_hash = ? WHERE one = 1", (last_hash,))
    with pytest.raises(AuditChainBroken, match="head was altered"):
        await log.verify()
    # The next append chains on but never re-signs the moved head: the cut stays visible.
    await log.append(entry(7))
    with pytest.raises(AuditChainBroken, match="head was altered"):
        await (await backend.audit()).verify()


@pytest.mark.anyio
async def test_a_log_begun_under_another_key_is_refused(backend: Backend) -> None:
    await (await backend.audit()).append(entry(0))
    with pytest.raises(StoreError, match="chained under audit key"):
        await backend.audit(key=b"b" * 32)


@pytest.mark.anyio
async def test_filters_seeds_and_grant_uses(backend: Backend) -> None:
    log = await backend.audit()
    await log.append(entry(0, tool="echo", session="s1", grant_id="g1", run_id="r1"))
    await log.append(entry(1, tool="echo", session="s2", grant_id="g1", cached=True))
    await log.append(entry(2, tool="other", decision="deny", outcome="denied"))
    assert [r.session for r in await log.records(tool="echo")] == ["s1", "s2"]
    assert [r.id for r in await log.records(session="s2")] == [2]
    assert [r.id for r in await log.records(run_id="r1")] == [1] and (await log.records(run_id="r1"))[0].run_id == "r1"
    assert [r.id for r in await log.records(limit=2)] == [2, 3]
    assert len(await log.timestamps("echo", 0.0)) == 1  # a cached replay did not run
    assert await log.grant_uses("g1") == 1
    assert await log.verify() == 3


@pytest.mark.anyio
async def test_a_checkpoint_holds_while_the_log_grows(backend: Backend) -> None:
    log = await backend.audit()
    for i in range(3):
        await log.append(entry(i))
    checkpoint = await log.checkpoint()
    for i in range(3, 5):
        await log.append(entry(i))
    assert (await log.verify_checkpoint(checkpoint)).records == 5
    backend.tamper("UPDATE audit SET args = '{}' WHERE id = 2")
    with pytest.raises(AuditChainBroken):
        await log.verify_checkpoint(checkpoint)


async def _ask(store: object, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
    return await store.create(  # type: ignore[attr-defined]
        session="main", tool="http", args={"url": "https://x.test"}, effects=("network",),
        hosts=("x.test",), reason="asks by default", timeout_s=timeout_s,
    )  # fmt: skip


@pytest.mark.anyio
async def test_an_answer_on_another_store_wakes_the_waiter(backend: Backend) -> None:
    waiting, answering = await backend.approvals(), await backend.approvals()
    request = await _ask(waiting)
    assert [r.id for r in await answering.list_pending()] == [request.id]

    async def answer_soon() -> None:
        await anyio.sleep(0.05)
        await answering.answer(request.id, "allow_once", by="gateway-a")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_soon)
        with anyio.fail_after(10):
            answered = await waiting.wait(request.id, timeout_s=10)
    assert answered.status is ApprovalStatus.ALLOW_ONCE and answered.answered_by == "gateway-a"
    with pytest.raises(ApprovalAnswered):
        await waiting.answer(request.id, "deny")


@pytest.mark.anyio
async def test_an_unanswered_request_expires(backend: Backend) -> None:
    store = await backend.approvals()
    request = await _ask(store, timeout_s=0.1)
    with pytest.raises(ApprovalTimeout):
        await store.wait(request.id, timeout_s=0.1)
    assert (await (await backend.approvals()).get(request.id)).status is ApprovalStatus.EXPIRED


@pytest.mark.anyio
async def test_a_detached_answer_is_used_once_across_stores(backend: Backend) -> None:
    first, second = await backend.approvals(), await backend.approvals()
    request = await _ask(first)
    await first.detach(request.id, "binding-1")
    await second.answer(request.id, "allow_once")
    found = await second.find_detached("binding-1")
    assert found is not None and found.id == request.id
    assert await first.consume(request.id) is True
    assert await second.consume(request.id) is False


@pytest.mark.anyio
async def test_an_approval_keeps_its_run_and_taint_across_stores(backend: Backend) -> None:
    asking, reading = await backend.approvals(), await backend.approvals()
    request = await asking.create(
        session="main", tool="write_file", args={"path": "x"}, effects=("write_filesystem",), hosts=(),
        reason="tainted", timeout_s=5.0, run_id="run-abc", tainted_by="the output of http (audit record 7)",
    )  # fmt: skip
    direct = await _ask(asking)
    seen = await reading.get(request.id)
    assert seen.run_id == "run-abc" and seen.tainted_by == "the output of http (audit record 7)"
    assert seen.to_dict()["run_id"] == "run-abc" and seen.to_dict()["tainted_by"].startswith("the output of http")
    assert (await reading.get(direct.id)).run_id is None and (await reading.get(direct.id)).tainted_by is None


@pytest.mark.anyio
async def test_a_grant_added_on_one_store_shows_on_another(backend: Backend) -> None:
    adding, reading = await backend.grants(), await backend.grants()
    assert await reading.all() == ()
    grant = Grant(tool="http", effects={EffectKind.NETWORK: Mode.ALLOW}, id="g-1", source="approval")
    await adding.add(grant)
    assert [g.id for g in await adding.all()] == ["g-1"]  # this process's own change: at once
    await anyio.sleep(RECHECK_INTERVAL_S * 2)
    assert [g.id for g in await reading.all()] == ["g-1"]
    assert await adding.remove("g-1") is True and await adding.remove("g-1") is False
    await anyio.sleep(RECHECK_INTERVAL_S * 2)
    assert await reading.all() == ()


@pytest.mark.anyio
async def test_the_grants_are_one_object_while_they_do_not_change(backend: Backend) -> None:
    """The dispatcher keeps its decisions per grant-set object: an unchanged set must be the same."""
    store = await backend.grants()
    await store.add(Grant(tool="http", effects={EffectKind.NETWORK: Mode.ALLOW}, id="g-1", source="approval"))
    first = await store.all()
    await anyio.sleep(RECHECK_INTERVAL_S * 2)  # re-checked: the version did not move
    assert await store.all() is first


@pytest.mark.anyio
async def test_idempotent_results_replay_per_session_and_conflict_on_other_args(backend: Backend) -> None:
    store = await backend.idempotency()
    assert await store.lookup("s1", "send", "k", "d1") is None
    assert await store.claim("s1", "send", "k") is True
    await store.store("s1", "send", "k", "d1", {"ok": True, "output": 1})
    await store.release("s1", "send", "k")
    other = await backend.idempotency()
    assert await other.lookup("s1", "send", "k", "d1") == {"ok": True, "output": 1}
    assert await other.lookup("s2", "send", "k", "d1") is None  # another session's key is not ours
    with pytest.raises(IdempotencyConflict):
        await other.lookup("s1", "send", "k", "d2")


@pytest.mark.anyio
async def test_concurrent_duplicates_on_two_stores_run_once(backend: Backend) -> None:
    """Two processes (the CLI beside a gateway, or two gateways): one of six duplicates runs."""
    stores = [await backend.idempotency(), await backend.idempotency()]
    runs: list[int] = []
    results: list[object] = []

    async def call(index: int) -> None:
        store = stores[index % 2]
        while True:
            stored = await store.lookup("main", "send", "key-1", "d")
            if stored is not None:
                results.append(stored)
                return
            if await store.claim("main", "send", "key-1"):
                break
        try:
            runs.append(index)
            await anyio.sleep(0.2)
            await store.store("main", "send", "key-1", "d", {"ok": True, "output": index})
            results.append({"ok": True, "output": index})
        finally:
            await store.release("main", "send", "key-1")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for index in range(6):
                tg.start_soon(call, index)
    assert len(runs) == 1
    assert results == [{"ok": True, "output": runs[0]}] * 6


@pytest.mark.anyio
async def test_a_claim_released_without_a_result_lets_the_next_duplicate_run(backend: Backend) -> None:
    first, second = await backend.idempotency(), await backend.idempotency()
    assert await first.claim("main", "send", "k") is True
    await first.release("main", "send", "k")  # the call failed before the tool ran: nothing stored
    with anyio.fail_after(10):
        assert await second.claim("main", "send", "k") is True
    await second.release("main", "send", "k")


@pytest.mark.anyio
async def test_the_oldest_results_are_evicted_past_the_maximum(backend: Backend) -> None:
    store = await backend.idempotency(max_entries=3)
    for n in range(5):
        await store.store("main", "send", f"k{n}", "d", {"ok": True, "output": n})
    kept = [n for n in range(5) if await store.lookup("main", "send", f"k{n}", "d") is not None]
    assert kept == [2, 3, 4]


@pytest.mark.anyio
async def test_a_run_and_its_transcript_round_trip(backend: Backend) -> None:
    store = await backend.runs()
    await store.create(run_id="r1", skill=None, params={"p": 1}, message="hi", trigger="cli", session="main",
                       provider="openai", model="x")  # fmt: skip
    await store.append_messages("r1", [(0, "system", {"content": "rules"}, None), (1, "tool", {"content": "ok"}, 7)])
    await store.update("r1", usage={"input_tokens": 3}, cost_usd=0.1, status="done", stop="end")
    other = await backend.runs()
    row = await other.get("r1")
    assert (row.status, row.stop, row.usage, row.cost_usd, row.params) == ("done", "end", {"input_tokens": 3}, 0.1, {"p": 1})
    assert row.ended_at is not None and row.to_dict()["params"] == {"p": 1}
    assert [m.audit_id for m in await other.messages("r1")] == [None, 7]
    assert [m.seq for m in await other.messages("r1", after_seq=0)] == [1]
    assert [r.id for r in await other.list()] == ["r1"] and await other.list(session="else") == []
    assert not (await other.request_cancel("r1")).cancel_requested  # it ended
    with pytest.raises(RunNotFound):
        await other.get("nope")


@pytest.mark.anyio
async def test_a_cancel_request_from_another_process_is_seen_by_the_run(backend: Backend) -> None:
    running, cancelling = await backend.runs(), await backend.runs()
    await running.create(run_id="r1", skill="s", params={}, message=None, trigger="cli", session="main",
                         provider="openai", model="x")  # fmt: skip
    assert (await cancelling.request_cancel("r1")).cancel_requested and await running.is_cancel_requested("r1")
    await running.create(run_id="r2", skill="s", params={}, message=None, trigger="cli", session="main",
                         provider="openai", model="x")  # fmt: skip
    await running.update("r2", status="done")
    assert not (await cancelling.request_cancel("r2")).cancel_requested


def test_an_unreachable_store_is_named_without_its_password() -> None:
    import socket

    from pincer.store.sql import open_postgres

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def main() -> None:
        await open_postgres(f"postgresql://pincer:s3cret-pw@127.0.0.1:{port}/pincer?password=s3cret-pw", size=1)

    with pytest.raises(StoreError) as info:
        anyio.run(main)
    shown = f"{info.value.message} {info.value.hint}"
    assert "s3cret-pw" not in shown and "pincer:***@127.0.0.1" in shown
    assert "[store] url" in (info.value.hint or "")


def test_a_store_that_was_not_upgraded_is_refused_with_the_command_that_fixes_it() -> None:
    from pincer.store.sql import open_postgres
    from pincer.store.sql.postgres import redact_url
    from tests.backends import postgres_server

    url = postgres_server().new_database()

    async def main() -> None:
        with pytest.raises(StoreError, match="has no pincer schema yet") as info:
            await open_postgres(url)
        assert "pincer db upgrade" in (info.value.hint or "")

    anyio.run(main)
    assert redact_url("postgresql://u:p@h/db?sslmode=require&password=x") == "postgresql://u:***@h/db?sslmode=require&password=***"


@given(user=st.text(alphabet=st.characters(blacklist_characters=":@/?#"), max_size=12),
       password=st.text(alphabet=st.characters(blacklist_characters="@/?#&"), min_size=4, max_size=24),
       rest=st.text(alphabet=st.characters(blacklist_characters="?&"), max_size=40))  # fmt: skip
def test_a_redacted_url_never_shows_its_password(user: str, password: str, rest: str) -> None:
    from pincer.store.sql.postgres import redact_url

    shown = redact_url(f"postgresql://{user}:{password}@db.example/{rest}")
    assert shown == f"postgresql://{user}:***@db.example/{rest}"


@given(st.text(max_size=200))
def test_redacting_any_text_only_returns_text(text: str) -> None:
    from pincer.store.sql.postgres import redact_url

    assert isinstance(redact_url(text), str)
