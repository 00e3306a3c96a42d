"""The trigger store on both backends: the webhook queue and the scheduler's one leader.

Two stores from one backend stand for two gateways. A firing queued with its delivery is there
for any of them after the one that accepted it is gone; two gateways claiming the queue at
once never start one firing twice; exactly one holds the scheduler's lease, and when its
process is SIGKILLed another takes it over.
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

from pincer.core.errors import UsageError
from pincer.store.owners import is_process_alive, process_token
from pincer.store.triggers import DeliveryExists, DeliveryRow, FiringRow
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio
CHILD_TIMEOUT_S = 60.0
LEASE_STALE_S = 30.0


def firing(n: int, **kw: object) -> FiringRow:
    values: dict[str, object] = {"id": f"f{n}", "ts": 100.0 + n, "kind": "hook", "name": "std", "fired_by": "hook",
                                 "session": "main", "run_id": f"r{n}", "status": "queued", "audit_id": n}  # fmt: skip
    values.update(kw)
    return FiringRow(**values)  # type: ignore[arg-type]


def delivery(delivery_id: str) -> DeliveryRow:
    return DeliveryRow(hook="std", delivery_id=delivery_id, received_at=time.time(), event="push", status=202,
                       response={"run_id": "r"})  # fmt: skip


async def test_a_delivery_and_its_firings_are_recorded_once_and_queued_for_any_gateway(backend: Backend) -> None:
    accepting, other = backend.triggers(), backend.triggers()
    accepting.insert_firings([firing(1), firing(2)], delivery=delivery("d-1"))
    with pytest.raises(DeliveryExists) as info:
        other.insert_firings([firing(3)], delivery=delivery("d-1"))
    assert info.value.row.response == {"run_id": "r"}
    assert [f.id for f in other.firings()] == ["f1", "f2"]  # nothing of the replay was written
    assert other.record_delivery(delivery("d-2")).delivery_id == "d-2"
    assert other.delivery("std", "d-2") is not None


async def test_two_gateways_claiming_the_queue_at_once_never_start_a_firing_twice(backend: Backend) -> None:
    stores = [backend.triggers() for _ in range(4)]  # one connection each, as gateways have
    stores[0].insert_firings([firing(n) for n in range(40)])
    claimed: list[str] = []

    async def claim(index: int) -> None:
        store = stores[index]
        while rows := await anyio.to_thread.run_sync(lambda: store.claim_queued(f"gw{index}", 3)):
            claimed.extend(row.id for row in rows)

    async with anyio.create_task_group() as tg:
        for index in range(4):
            tg.start_soon(claim, index)
    assert sorted(claimed) == sorted(f"f{n}" for n in range(40))


async def test_a_job_name_is_taken_once_unless_replaced(backend: Backend) -> None:
    store = backend.triggers()
    store.add_job(name="nightly", source="cli", spec={"cron": "0 3 * * *"}, spec_hash="h1", next_run=10.0)
    with pytest.raises(UsageError, match="exists already"):
        backend.triggers().add_job(name="nightly", source="cli", spec={}, spec_hash="h2", next_run=None)
    store.add_job(name="nightly", source="cli", spec={"cron": "0 4 * * *"}, spec_hash="h3", next_run=20.0, replace=True)
    job = backend.triggers().require_job("nightly")
    assert (job.spec_hash, job.next_run, job.spec) == ("h3", 20.0, {"cron": "0 4 * * *"})


_HOLDER = """
import sys, time
from pathlib import Path
from typing import Any
kind, where = sys.argv[1], sys.argv[2]
if kind == "sqlite":
    from pincer.store.db import open_database
    from pincer.store.triggers import TriggerStore
    store = TriggerStore(open_database(Path(where)))
else:
    from pincer.store.pg.connect import PgPools
    from pincer.store.pg.triggers import PgTriggerStore
    store = PgTriggerStore(PgPools.open(where, size=1))
from pincer.store.owners import is_process_alive, process_token
assert store.acquire_lease(process_token(), now=time.time(), stale_s=30.0, is_alive=is_process_alive)
print("leading", flush=True)
time.sleep(600)
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
        mine = backend.triggers()
        me = process_token()
        assert not mine.acquire_lease(me, now=time.time(), stale_s=LEASE_STALE_S, is_alive=is_process_alive)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=CHILD_TIMEOUT_S)
        # Well within the lease's staleness: the holder's death itself frees it.
        with anyio.fail_after(CHILD_TIMEOUT_S):
            while not mine.acquire_lease(me, now=time.time(), stale_s=LEASE_STALE_S, is_alive=is_process_alive):
                await anyio.sleep(0.05)
        assert mine.lease_holder() is not None and mine.lease_holder()[0] == me
        assert mine.acquire_lease(me, now=time.time(), stale_s=LEASE_STALE_S, is_alive=is_process_alive)  # renewal
        other = backend.triggers()
        assert not other.acquire_lease("someone-else:1", now=time.time(), stale_s=LEASE_STALE_S, is_alive=lambda _t: True)
        mine.release_lease(me)
        assert other.acquire_lease("someone-else:1", now=time.time(), stale_s=LEASE_STALE_S, is_alive=lambda _t: True)
        other.release_lease("someone-else:1")
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
    store, audit = backend.triggers(), backend.audit()
    with anyio.fail_after(CHILD_TIMEOUT_S):
        ids = await store.insert_audited([firing(1, audit_id=None), firing(2, audit_id=None)],
                                         [audit_entry(1), audit_entry(2)], audit=audit, delivery=delivery("d-1"))  # fmt: skip
        assert [f.audit_id for f in store.firings()] == ids
        records = {r.id: r.idempotency_key for r in audit.records()}
        assert [records[i] for i in ids] == ["f1", "f2"]
        with pytest.raises(DeliveryExists):
            await store.insert_audited([firing(3, audit_id=None)], [audit_entry(3)], audit=audit, delivery=delivery("d-1"))
    assert len(audit.records()) == 2  # the replay wrote no audit record and no firing
    assert [f.id for f in store.firings()] == ["f1", "f2"]
    assert audit.verify() == 2


async def test_deliveries_calls_and_queue_claims_at_once_keep_one_chain_and_never_wait_on_each_other(
    backend: Backend,
) -> None:
    """Deliveries chained in their own transactions, ordinary appends group-committed and the queue
    claimed (a synchronous store transaction on the event loop), all interleaved: nothing waits on
    a lock held across an await, every firing carries its own record's id, and the chain holds."""
    store, audit = backend.triggers(), backend.audit()
    firing_ids: dict[str, int] = {}

    async def deliver(n: int) -> None:
        ids = await store.insert_audited([firing(n, audit_id=None)], [audit_entry(n)], audit=audit,
                                         delivery=delivery(f"d-{n}"))  # fmt: skip
        firing_ids[f"f{n}"] = ids[0]

    async def call(n: int) -> None:
        await audit.append(audit_entry(1000 + n))

    async def claim() -> None:
        for _ in range(20):
            store.claim_queued("gw", 5)
            await anyio.sleep(0)

    with anyio.fail_after(CHILD_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(deliver, n)
                tg.start_soon(call, n)
            tg.start_soon(claim)
    keys = {r.id: r.idempotency_key for r in audit.records()}
    assert {f: keys[i] for f, i in firing_ids.items()} == {f: f for f in firing_ids}
    assert {f.id: f.audit_id for f in store.firings(limit=1000)} == firing_ids
    assert audit.verify() == 80


async def test_on_sqlite_accepting_a_delivery_is_one_commit(tmp_path: Path) -> None:
    from pincer.store import AuditLog, open_database
    from pincer.store.triggers import TriggerStore

    conn = open_database(tmp_path)
    store, audit = TriggerStore(conn), AuditLog(conn, key=b"a" * 32)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    await store.insert_audited([firing(1, audit_id=None)], [audit_entry(1)], audit=audit, delivery=delivery("d-1"))
    conn.set_trace_callback(None)
    assert [s for s in statements if s.strip().upper().startswith(("COMMIT", "BEGIN"))] == ["BEGIN IMMEDIATE", "COMMIT"]
    assert store.firings()[0].audit_id == audit.records()[0].id


async def test_with_the_audit_writer_thread_a_delivery_commits_there_with_its_records(tmp_path: Path) -> None:
    """``[audit] synchronous = "full"``: the batch (the delivery's rows with it) commits on the
    writer's connection in a worker thread; a replay is still refused with nothing written."""
    from pincer.store import AuditLog, open_database
    from pincer.store.triggers import TriggerStore

    conn = open_database(tmp_path, synchronous="FULL")
    writer = open_database(tmp_path, synchronous="FULL")
    store, audit = TriggerStore(conn), AuditLog(conn, key=b"a" * 32, writer=writer)
    with anyio.fail_after(CHILD_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(lambda n=n: store.insert_audited([firing(n, audit_id=None)], [audit_entry(n)], audit=audit,
                                                               delivery=delivery(f"d-{n}")))  # fmt: skip
        with pytest.raises(DeliveryExists):
            await store.insert_audited([firing(99, audit_id=None)], [audit_entry(99)], audit=audit, delivery=delivery("d-1"))
    keys = {r.id: r.idempotency_key for r in audit.records()}
    assert {f.id: keys[f.audit_id] for f in store.firings() if f.audit_id is not None} == {f"f{n}": f"f{n}" for n in range(8)}
    assert audit.verify() == 8
