"""The trigger store on both backends: the webhook queue and the scheduler's one leader.

Two stores from one backend stand for two gateways. A firing queued with its delivery is there
for any of them after the one that accepted it is gone; two gateways claiming the queue at
once never start one firing twice; exactly one leads the scheduler, and when its process is
SIGKILLed another takes the lead over.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.errors import JobNotFound, UsageError
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.owners import process_token
from pincer.store.sql.sqlite import SqliteDatabase
from pincer.store.triggers import DeliveryExists, DeliveryRow, FiringRow, TriggerStore
from tests.store.conftest import Backend, Opener

pytestmark = pytest.mark.anyio
CHILD_TIMEOUT_S = 60.0


def firing(n: int, **kw: object) -> FiringRow:
    values: dict[str, object] = {"id": f"f{n}", "ts": 100.0 + n, "kind": "hook", "name": "std", "fired_by": "hook",
                                 "session": "main", "run_id": f"r{n}", "status": "queued", "audit_id": n}  # fmt: skip
    values.update(kw)
    return FiringRow(**values)  # type: ignore[arg-type]


def delivery(delivery_id: str) -> DeliveryRow:
    return DeliveryRow(hook="std", delivery_id=delivery_id, received_at=time.time(), event="push", status=202,
                       response={"run_id": "r"})  # fmt: skip


async def test_a_delivery_and_its_firings_are_recorded_once_and_queued_for_any_gateway(backend: Backend) -> None:
    accepting, other = await backend.triggers(), await backend.triggers()
    await accepting.insert_firings([firing(1), firing(2)], delivery=delivery("d-1"))
    with pytest.raises(DeliveryExists) as info:
        await other.insert_firings([firing(3)], delivery=delivery("d-1"))
    assert info.value.row.response == {"run_id": "r"}
    assert [f.id for f in await other.firings()] == ["f1", "f2"]  # nothing of the replay was written
    assert (await other.record_delivery(delivery("d-2"))).delivery_id == "d-2"
    assert await other.delivery("std", "d-2") is not None


async def test_two_gateways_claiming_the_queue_at_once_never_start_a_firing_twice(backend: Backend) -> None:
    stores = [await backend.triggers() for _ in range(4)]  # one connection each, as gateways have
    await stores[0].insert_firings([firing(n) for n in range(40)])
    claimed: list[str] = []

    async def claim(index: int) -> None:
        store = stores[index]
        while rows := await store.claim_queued(f"gw{index}", 3):
            claimed.extend(row.id for row in rows)

    async with anyio.create_task_group() as tg:
        for index in range(4):
            tg.start_soon(claim, index)
    assert sorted(claimed) == sorted(f"f{n}" for n in range(40))


async def test_a_job_name_is_taken_once_unless_replaced(backend: Backend) -> None:
    store = await backend.triggers()
    await store.add_job(name="nightly", source="cli", spec={"cron": "0 3 * * *"}, spec_hash="h1", next_run=10.0)
    with pytest.raises(UsageError, match="exists already"):
        await (await backend.triggers()).add_job(name="nightly", source="cli", spec={}, spec_hash="h2", next_run=None)
    await store.add_job(name="nightly", source="cli", spec={"cron": "0 4 * * *"}, spec_hash="h3", next_run=20.0, replace=True)
    job = await (await backend.triggers()).require_job("nightly")
    assert (job.spec_hash, job.next_run, job.spec) == ("h3", 20.0, {"cron": "0 4 * * *"})


_HOLDER = """
import sys
from pathlib import Path
import anyio
from pincer.store.owners import process_token
from pincer.store.sql import open_postgres, open_sqlite
from pincer.store.triggers import TriggerStore
kind, where = sys.argv[1], sys.argv[2]

async def main():
    db = await (open_sqlite(Path(where)) if kind == "sqlite" else open_postgres(where, size=1))
    store = TriggerStore(db)  # held: the lead lives as long as the store holds it
    assert await store.acquire_lease(process_token())
    print("leading", flush=True)
    await anyio.sleep(600)

anyio.run(main)
"""


async def test_one_leader_at_a_time_and_another_takes_over_when_it_is_killed(backend: Backend, tmp_path: Path) -> None:
    where = backend.url if backend.kind == "postgres" else str(tmp_path)
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, backend.kind, where], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "leading"
        mine = await backend.triggers()
        me = process_token()
        assert not await mine.acquire_lease(me)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=CHILD_TIMEOUT_S)
        # The holder's death itself frees the lead (its flock, its connection's lock).
        with anyio.fail_after(CHILD_TIMEOUT_S):
            while not await mine.acquire_lease(me):
                await anyio.sleep(0.05)
        holder = await mine.lease_holder()
        assert holder is not None and holder[0] == me
        assert await mine.acquire_lease(me)  # renewal
        other = await backend.triggers()
        assert not await other.acquire_lease("someone-else:1")
        await mine.release_lease(me)
        assert await mine.lease_holder() is None
        assert await other.acquire_lease("someone-else:1")
        await other.release_lease("someone-else:1")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=CHILD_TIMEOUT_S)
        if child.stdout:
            child.stdout.close()


# -- a delivery, its firings and their audit records: one transaction ------------------------------


def audit_entry(n: int) -> Any:
    from pincer.store.audit import AuditEntry

    return AuditEntry(session="main", caller="trigger", tool="webhook:std", kind="trigger", decision="allow",
                      reason="fired by hook", outcome="ok", args={"firing": f"f{n}"}, idempotency_key=f"f{n}")  # fmt: skip


async def test_a_delivery_its_firings_and_their_audit_records_are_written_together(backend: Backend) -> None:
    store, audit = await backend.triggers(), await backend.audit()
    with anyio.fail_after(CHILD_TIMEOUT_S):
        ids = await store.insert_audited([firing(1, audit_id=None), firing(2, audit_id=None)],
                                         [audit_entry(1), audit_entry(2)], audit=audit, delivery=delivery("d-1"))  # fmt: skip
        assert [f.audit_id for f in await store.firings()] == ids
        records = {r.id: r.idempotency_key for r in await audit.records()}
        assert [records[i] for i in ids] == ["f1", "f2"]
        with pytest.raises(DeliveryExists):
            await store.insert_audited([firing(3, audit_id=None)], [audit_entry(3)], audit=audit, delivery=delivery("d-1"))
    assert len(await audit.records()) == 2  # the replay wrote no audit record and no firing
    assert [f.id for f in await store.firings()] == ["f1", "f2"]
    assert await audit.verify() == 2


async def test_deliveries_calls_and_queue_claims_at_once_keep_one_chain_and_never_wait_on_each_other(
    backend: Backend,
) -> None:
    """Deliveries chained in their own transactions, ordinary appends group-committed and the queue
    claimed (a synchronous store transaction on the event loop), all interleaved: nothing waits on
    a lock held across an await, every firing carries its own record's id, and the chain holds."""
    store, audit = await backend.triggers(), await backend.audit()
    firing_ids: dict[str, int] = {}

    async def deliver(n: int) -> None:
        ids = await store.insert_audited([firing(n, audit_id=None)], [audit_entry(n)], audit=audit,
                                         delivery=delivery(f"d-{n}"))  # fmt: skip
        firing_ids[f"f{n}"] = ids[0]

    async def call(n: int) -> None:
        await audit.append(audit_entry(1000 + n))

    async def claim() -> None:
        for _ in range(20):
            await store.claim_queued("gw", 5)
            await anyio.sleep(0)

    with anyio.fail_after(CHILD_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(deliver, n)
                tg.start_soon(call, n)
            tg.start_soon(claim)
    keys = {r.id: r.idempotency_key for r in await audit.records()}
    assert {f: keys[i] for f, i in firing_ids.items()} == {f: f for f in firing_ids}
    assert {f.id: f.audit_id for f in await store.firings(limit=1000)} == firing_ids
    assert await audit.verify() == 80


async def test_on_sqlite_accepting_a_delivery_is_one_commit(tmp_path: Path, opened: Opener) -> None:
    statements: list[str] = []
    db = await opened.db(tmp_path)
    store, audit = TriggerStore(db), await AuditLog.open(db, key=b"a" * 32)
    assert isinstance(db, SqliteDatabase)
    await db.trace(statements.append)
    await store.insert_audited([firing(1, audit_id=None)], [audit_entry(1)], audit=audit, delivery=delivery("d-1"))
    await db.trace(None)
    assert [s for s in statements if s.strip().upper().startswith(("COMMIT", "BEGIN"))] == ["BEGIN IMMEDIATE", "COMMIT"]
    assert (await store.firings())[0].audit_id == (await audit.records())[0].id


async def test_deliveries_committing_together_each_keep_their_records(tmp_path: Path, opened: Opener) -> None:
    """``[audit] synchronous = "full"``: several deliveries at once share commits (an fsync
    each); each firing names its own record, and a replay is still refused with nothing written."""
    db = await opened.db(tmp_path, synchronous="FULL")
    store, audit = TriggerStore(db), await AuditLog.open(db, key=b"a" * 32)

    async def deliver(n: int) -> None:
        await store.insert_audited([firing(n, audit_id=None)], [audit_entry(n)], audit=audit, delivery=delivery(f"d-{n}"))

    with anyio.fail_after(CHILD_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(deliver, n)
        with pytest.raises(DeliveryExists):
            await store.insert_audited([firing(99, audit_id=None)], [audit_entry(99)], audit=audit, delivery=delivery("d-1"))
    keys = {r.id: r.idempotency_key for r in await audit.records()}
    assert {f.id: keys[f.audit_id] for f in await store.firings() if f.audit_id is not None} == {f"f{n}": f"f{n}" for n in range(8)}
    assert await audit.verify() == 8


# -- jobs, one firing's life, deliveries --------------------------------------------------------


async def test_an_unknown_job_is_named_with_the_jobs_there_are(backend: Backend) -> None:
    store = await backend.triggers()
    with pytest.raises(JobNotFound, match=r"no job named 'nightly' \(jobs: none yet\)") as info:
        await store.require_job("nightly")
    assert "pincer cron list" in (info.value.hint or "")
    await store.add_job(name="hourly", source="cli", spec={"cron": "0 * * * *"}, spec_hash="h", next_run=10.0)
    with pytest.raises(JobNotFound, match=r"\(jobs: hourly\)"):
        await store.require_job("nightly")
    assert await store.remove_job("hourly") and not await store.remove_job("hourly")
    assert await store.job("hourly") is None


async def test_an_instant_of_a_job_is_moved_on_by_one_of_two_gateways_at_once(backend: Backend) -> None:
    """Whoever moves an instant on fires it: two processes that both thought they led fire it once."""
    stores = [await backend.triggers() for _ in range(2)]
    await stores[0].add_job(name="nightly", source="cli", spec={"cron": "0 3 * * *"}, spec_hash="h", next_run=100.0)
    moved: list[int] = []

    async def move(index: int) -> None:
        if await stores[index].move_next_run("nightly", due=100.0, to=200.0, last_run=100.0, last_status="fired"):
            moved.append(index)

    async with anyio.create_task_group() as tg:
        for index in range(2):
            tg.start_soon(move, index)
    assert len(moved) == 1
    job = await stores[1].require_job("nightly")
    assert (job.next_run, job.last_run, job.last_status) == (200.0, 100.0, "fired")
    with pytest.raises(ValueError, match=r"not job state: \[.created_at.\]"):  # only a job's state moves
        await stores[0].move_next_run("nightly", due=200.0, to=300.0, created_at=0.0)
    await stores[1].update_job("nightly", paused=1, spec={"cron": "0 4 * * *"}, last_error=None)
    job = await stores[0].require_job("nightly")
    assert job.paused is True and job.spec == {"cron": "0 4 * * *"} and job.next_run == 200.0


async def test_one_firing_is_started_once_ended_once_and_requeued_when_its_gateway_gives_it_back(
    backend: Backend,
) -> None:
    first, second = await backend.triggers(), await backend.triggers()
    await first.insert_firings([firing(1, job="nightly"), firing(2, audit_id=None), firing(3, job="other")])
    assert [f.id for f in await second.unaudited()] == ["f2"]
    await second.set_audit("f2", 42)
    assert await second.unaudited() == []
    assert await first.open_count() == 3 and await first.open_count(job="nightly") == 1
    taken = [await first.claim("f1", "gw-a"), await second.claim("f1", "gw-b")]
    assert taken[1] is None and taken[0] is not None and taken[0].owner == "gw-a" and taken[0].status == "starting"
    shown = taken[0].to_dict()
    assert "owner" not in shown and "request" not in shown and shown["job"] == "nightly"
    await first.set_statuses([("f1", "started", None, None)])
    assert (await second.firing("f1")).status == "started"  # type: ignore[union-attr]
    await first.set_statuses([("f1", "failed", "the run failed", 500.0)])
    ended = await second.firing("f1")
    assert ended is not None and (ended.status, ended.error, ended.ended_at) == ("failed", "the run failed", 500.0)
    assert await first.claim("f3", "gw-a") is not None
    await first.requeue("f3")  # its gateway gave it back (shutting down): any gateway may take it
    assert (await second.claim("f3", "gw-b")).owner == "gw-b"  # type: ignore[union-attr]
    await second.finish("f3", "ok", now=600.0)
    assert [f.id for f in await first.open_firings()] == ["f2"]
    assert await first.firing("nope") is None


async def test_a_replayed_delivery_returns_the_first_ones_answer_and_old_ones_are_pruned(backend: Backend) -> None:
    store, other = await backend.triggers(), await backend.triggers()
    first = DeliveryRow(
        hook="std", delivery_id="d-9", received_at=10.0, event="push", status=202, response={"run_id": "r1"}
    )
    assert await store.record_delivery(first) == first
    replay = DeliveryRow(hook="std", delivery_id="d-9", received_at=20.0, event="push", status=202, response={"x": 1})
    assert (await other.record_delivery(replay)).response == {"run_id": "r1"}
    await other.record_delivery(DeliveryRow(hook="std", delivery_id="d-10", received_at=30.0, event=None, status=200,
                                            response={}))  # fmt: skip
    assert await store.prune_deliveries(25.0) == 1
    assert await store.delivery("std", "d-9") is None and await store.delivery("std", "d-10") is not None


async def test_a_firings_audit_record_is_found_so_recovery_never_writes_two(backend: Backend) -> None:
    audit = await backend.audit()
    store = await backend.triggers()
    assert await store.audited_firing("cron:nightly", "f7") is None
    record_id = await audit.append(AuditEntry(session="main", caller="trigger", tool="cron:nightly", decision="allow",
                                              reason="fired", outcome="ok", kind="trigger", idempotency_key="f7"))  # fmt: skip
    assert await store.audited_firing("cron:nightly", "f7") == record_id
    assert await store.audited_firing("cron:other", "f7") is None
