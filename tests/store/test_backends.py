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
    first, second = backend.audit(), backend.audit()
    ids: list[int] = []

    async def one(log: object, i: int) -> None:
        ids.append(await log.append(entry(i)))  # type: ignore[attr-defined]

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(one, first if i % 2 else second, i)
    assert sorted(ids) == list(range(1, 61))
    assert first.verify() == 60 and second.verify() == 60
    records = first.records()
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(records))
    assert first.append_sync(entry(99)) == 61 and second.verify() == 61


@pytest.mark.anyio
async def test_an_altered_record_is_named(backend: Backend) -> None:
    log = backend.audit()
    for i in range(6):
        await log.append(entry(i))
    backend.tamper("UPDATE audit SET reason = 'nothing to see' WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 4 and "altered" in info.value.message


@pytest.mark.anyio
async def test_a_deleted_record_is_named(backend: Backend) -> None:
    log = backend.audit()
    for i in range(6):
        await log.append(entry(i))
    backend.tamper("DELETE FROM audit WHERE id = 3")
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 3 and "missing" in info.value.message


@pytest.mark.anyio
async def test_a_cut_tail_with_the_head_moved_to_match_fails_on_the_head_mac(backend: Backend) -> None:
    log = backend.audit()
    for i in range(6):
        await log.append(entry(i))
    last_hash = log.records()[3].hash
    backend.tamper("DELETE FROM audit WHERE id > 4")
    backend.tamper("UPDATE audit_head SET last_id = 4, last_hash = ? WHERE one = 1", (last_hash,))
    with pytest.raises(AuditChainBroken, match="head was altered"):
        log.verify()
    # The next append chains on but never re-signs the moved head: the cut stays visible.
    await log.append(entry(7))
    with pytest.raises(AuditChainBroken, match="head was altered"):
        backend.audit().verify()


@pytest.mark.anyio
async def test_a_log_begun_under_another_key_is_refused(backend: Backend) -> None:
    await backend.audit().append(entry(0))
    with pytest.raises(StoreError, match="chained under audit key"):
        backend.audit(key=b"b" * 32)


@pytest.mark.anyio
async def test_filters_seeds_and_grant_uses(backend: Backend) -> None:
    log = backend.audit()
    await log.append(entry(0, tool="echo", session="s1", grant_id="g1", run_id="r1"))
    await log.append(entry(1, tool="echo", session="s2", grant_id="g1", cached=True))
    await log.append(entry(2, tool="other", decision="deny", outcome="denied"))
    assert [r.session for r in log.records(tool="echo")] == ["s1", "s2"]
    assert [r.id for r in log.records(session="s2")] == [2]
    assert [r.id for r in log.records(run_id="r1")] == [1] and log.records(run_id="r1")[0].run_id == "r1"
    assert [r.id for r in log.records(limit=2)] == [2, 3]
    assert len(log.timestamps("echo", 0.0)) == 1  # a cached replay did not run
    assert log.grant_uses("g1") == 1
    assert log.verify() == 3


@pytest.mark.anyio
async def test_a_checkpoint_holds_while_the_log_grows(backend: Backend) -> None:
    log = backend.audit()
    for i in range(3):
        await log.append(entry(i))
    checkpoint = log.checkpoint()
    for i in range(3, 5):
        await log.append(entry(i))
    assert log.verify_checkpoint(checkpoint).records == 5
    backend.tamper("UPDATE audit SET args = '{}' WHERE id = 2")
    with pytest.raises(AuditChainBroken):
        log.verify_checkpoint(checkpoint)


def _ask(store: object, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
    return store.create(  # type: ignore[attr-defined]
        session="main", tool="http", args={"url": "https://x.test"}, effects=("network",),
        hosts=("x.test",), reason="asks by default", timeout_s=timeout_s,
    )  # fmt: skip


@pytest.mark.anyio
async def test_an_answer_on_another_store_wakes_the_waiter(backend: Backend) -> None:
    waiting, answering = backend.approvals(), backend.approvals()
    request = _ask(waiting)
    assert [r.id for r in answering.list_pending()] == [request.id]

    async def answer_soon() -> None:
        await anyio.sleep(0.05)
        answering.answer(request.id, "allow_once", by="gateway-a")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_soon)
        with anyio.fail_after(10):
            answered = await waiting.wait(request.id, timeout_s=10)
    assert answered.status is ApprovalStatus.ALLOW_ONCE and answered.answered_by == "gateway-a"
    with pytest.raises(ApprovalAnswered):
        waiting.answer(request.id, "deny")


@pytest.mark.anyio
async def test_an_unanswered_request_expires(backend: Backend) -> None:
    store = backend.approvals()
    request = _ask(store, timeout_s=0.1)
    with pytest.raises(ApprovalTimeout):
        await store.wait(request.id, timeout_s=0.1)
    assert backend.approvals().get(request.id).status is ApprovalStatus.EXPIRED


@pytest.mark.anyio
async def test_a_detached_answer_is_used_once_across_stores(backend: Backend) -> None:
    first, second = backend.approvals(), backend.approvals()
    request = _ask(first)
    first.detach(request.id, "binding-1")
    second.answer(request.id, "allow_once")
    found = second.find_detached("binding-1")
    assert found is not None and found.id == request.id
    assert first.consume(request.id) is True
    assert second.consume(request.id) is False


@pytest.mark.anyio
async def test_an_approval_keeps_its_run_and_taint_across_stores(backend: Backend) -> None:
    asking, reading = backend.approvals(), backend.approvals()
    request = asking.create(
        session="main", tool="write_file", args={"path": "x"}, effects=("write_filesystem",), hosts=(),
        reason="tainted", timeout_s=5.0, run_id="run-abc", tainted_by="the output of http (audit record 7)",
    )  # fmt: skip
    direct = _ask(asking)
    seen = reading.get(request.id)
    assert seen.run_id == "run-abc" and seen.tainted_by == "the output of http (audit record 7)"
    assert seen.to_dict()["run_id"] == "run-abc" and seen.to_dict()["tainted_by"].startswith("the output of http")
    assert reading.get(direct.id).run_id is None and reading.get(direct.id).tainted_by is None


def test_a_postgres_store_of_schema_2_upgrades_and_keeps_its_approvals() -> None:
    """A PostgreSQL store upgraded before approvals named their run (schema 2): ``pincer db
    upgrade`` takes it to the current schema, its requests read back with no run."""
    import psycopg

    from pincer.store.pg.approvals import PgApprovalStore
    from pincer.store.pg.connect import PgPools
    from pincer.store.pg.schema import _VERSION_TABLE, MIGRATIONS, SCHEMA_VERSION, _statements, upgrade
    from tests.backends import postgres_server

    url = postgres_server().new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_VERSION_TABLE)
        for version, script in enumerate(MIGRATIONS[:2], start=1):
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO pincer_schema (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
            "VALUES ('old1', 1, 9e12, 'main', 'write_file', '{}', '[]', '[]', 'asks by default', 'pending')"
        )
        assert upgrade(conn) == (2, SCHEMA_VERSION)
    pools = PgPools.open(url, size=2)
    try:
        store = PgApprovalStore(pools)
        old = store.get("old1")
        assert old.run_id is None and old.tainted_by is None and old.tool == "write_file"
        new = store.create(session="main", tool="http", args={}, effects=(), hosts=(), reason="r", timeout_s=5,
                           run_id="run-1", tainted_by="the output of http (audit record 3)")  # fmt: skip
        assert store.get(new.id).run_id == "run-1"
    finally:
        pools.close()


@pytest.mark.anyio
async def test_a_grant_added_on_one_store_shows_on_another(backend: Backend) -> None:
    adding, reading = backend.grants(), backend.grants()
    assert reading.all() == ()
    grant = Grant(tool="http", effects={EffectKind.NETWORK: Mode.ALLOW}, id="g-1", source="approval")
    adding.add(grant)
    assert [g.id for g in adding.all()] == ["g-1"]
    await anyio.sleep(RECHECK_INTERVAL_S * 2)
    assert [g.id for g in reading.all()] == ["g-1"]
    assert adding.remove("g-1") is True and adding.remove("g-1") is False
    await anyio.sleep(RECHECK_INTERVAL_S * 2)
    assert reading.all() == ()


@pytest.mark.anyio
async def test_idempotent_results_replay_per_session_and_conflict_on_other_args(backend: Backend) -> None:
    store = backend.idempotency()
    assert store.lookup("s1", "send", "k", "d1") is None
    assert await store.claim("s1", "send", "k") is True
    store.store("s1", "send", "k", "d1", {"ok": True, "output": 1})
    store.release("s1", "send", "k")
    other = backend.idempotency()
    assert other.lookup("s1", "send", "k", "d1") == {"ok": True, "output": 1}
    assert other.lookup("s2", "send", "k", "d1") is None  # another session's key is not ours
    with pytest.raises(IdempotencyConflict):
        other.lookup("s1", "send", "k", "d2")


@pytest.mark.anyio
async def test_concurrent_duplicates_on_two_stores_run_once(backend: Backend) -> None:
    stores = [backend.idempotency(), backend.idempotency()]
    runs: list[int] = []
    results: list[object] = []

    async def call(index: int) -> None:
        store = stores[index % 2]
        while True:
            stored = store.lookup("main", "send", "key-1", "d")
            if stored is not None:
                results.append(stored)
                return
            if await store.claim("main", "send", "key-1"):
                break
        try:
            runs.append(index)
            await anyio.sleep(0.2)
            store.store("main", "send", "key-1", "d", {"ok": True, "output": index})
            results.append({"ok": True, "output": index})
        finally:
            store.release("main", "send", "key-1")

    if backend.kind == "sqlite":
        stores = [stores[0], stores[0]]  # SQLite folds within one process (its documented scope)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for index in range(6):
                tg.start_soon(call, index)
    assert len(runs) == 1
    assert results == [{"ok": True, "output": runs[0]}] * 6


@pytest.mark.anyio
async def test_a_claim_released_without_a_result_lets_the_next_duplicate_run(backend: Backend) -> None:
    first, second = backend.idempotency(), backend.idempotency()
    assert await first.claim("main", "send", "k") is True
    first.release("main", "send", "k")  # the call failed before the tool ran: nothing stored
    with anyio.fail_after(10):
        assert await second.claim("main", "send", "k") is True
    second.release("main", "send", "k")


@pytest.mark.anyio
async def test_a_run_and_its_transcript_round_trip(backend: Backend) -> None:
    store = backend.runs()
    store.create(run_id="r1", skill=None, params={"p": 1}, message="hi", trigger="cli", session="main",
                 provider="openai", model="x")  # fmt: skip
    store.append_messages("r1", [(0, "system", {"content": "rules"}, None), (1, "tool", {"content": "ok"}, 7)])
    store.update("r1", usage={"input_tokens": 3}, cost_usd=0.1, status="done", stop="end")
    other = backend.runs()
    row = other.get("r1")
    assert (row.status, row.stop, row.usage, row.cost_usd, row.params) == ("done", "end", {"input_tokens": 3}, 0.1, {"p": 1})
    assert [m.audit_id for m in other.messages("r1")] == [None, 7]
    assert [r.id for r in other.list()] == ["r1"] and other.list(session="else") == []
    assert not other.request_cancel("r1").cancel_requested  # it ended
    with pytest.raises(RunNotFound):
        other.get("nope")


def test_an_unreachable_store_is_named_without_its_password() -> None:
    import socket

    from pincer.store.pg.connect import PgPools

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StoreError) as info:
        PgPools.open(f"postgresql://pincer:s3cret-pw@127.0.0.1:{port}/pincer?password=s3cret-pw", size=1)
    shown = f"{info.value.message} {info.value.hint}"
    assert "s3cret-pw" not in shown and "pincer:***@127.0.0.1" in shown
    assert "[store] url" in (info.value.hint or "")


def test_a_store_that_was_not_upgraded_is_refused_with_the_command_that_fixes_it() -> None:
    from pincer.store.pg import PgStores
    from pincer.store.pg.connect import redact_url
    from tests.backends import postgres_server

    url = postgres_server().new_database()

    async def main() -> None:
        with pytest.raises(StoreError, match="has no pincer schema yet") as info:
            await PgStores.open(url, key=b"k" * 32, ttl_s=60, max_entries=10)
        assert "pincer db upgrade" in (info.value.hint or "")

    anyio.run(main)
    assert redact_url("postgresql://u:p@h/db?sslmode=require&password=x") == "postgresql://u:***@h/db?sslmode=require&password=***"


@given(user=st.text(alphabet=st.characters(blacklist_characters=":@/?#"), max_size=12),
       password=st.text(alphabet=st.characters(blacklist_characters="@/?#&"), min_size=4, max_size=24),
       rest=st.text(alphabet=st.characters(blacklist_characters="?&"), max_size=40))  # fmt: skip
def test_a_redacted_url_never_shows_its_password(user: str, password: str, rest: str) -> None:
    from pincer.store.pg.connect import redact_url

    shown = redact_url(f"postgresql://{user}:{password}@db.example/{rest}")
    assert shown == f"postgresql://{user}:***@db.example/{rest}"


@given(st.text(max_size=200))
def test_redacting_any_text_only_returns_text(text: str) -> None:
    from pincer.store.pg.connect import redact_url

    assert isinstance(redact_url(text), str)
