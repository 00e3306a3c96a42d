from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import AuditChainBroken
from pincer.store import AuditEntry, AuditLog, open_database


def entry(i: int, **kw) -> AuditEntry:
    base = {"session": "main", "caller": "test", "tool": f"t{i % 3}", "decision": "allow", "reason": "r", "outcome": "ok", "args": {"i": i}}
    base.update(kw)
    return AuditEntry(**base)


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(open_database(tmp_path))


@pytest.mark.anyio
async def test_sequential_appends_chain_and_verify(log: AuditLog) -> None:
    ids = [await log.append(entry(i)) for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]
    assert log.verify() == 5
    records = log.records()
    assert [r.args for r in records] == [{"i": i} for i in range(5)]
    assert records[1].prev_hash == records[0].hash


@pytest.mark.anyio
async def test_concurrent_appends_are_group_committed_and_all_durable(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path))
    ids: list[int] = []

    async def one(i: int) -> None:
        ids.append(await log.append(entry(i)))

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(one, i)
    assert sorted(ids) == list(range(1, 65))
    # A second connection (another process's view) sees every record committed.
    other = AuditLog(open_database(tmp_path))
    assert other.verify() == 64


def _tamper(db: Path, sql: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql, params)
    conn.commit()
    conn.close()


@pytest.mark.anyio
async def test_verify_names_altered_record(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path))
    for i in range(6):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "UPDATE audit SET reason = 'nothing to see' WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 4
    assert "altered" in info.value.message


@pytest.mark.anyio
async def test_verify_names_deleted_record(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path))
    for i in range(6):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "DELETE FROM audit WHERE id = 3")
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 3


@pytest.mark.anyio
async def test_verify_detects_reordered_records(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path))
    for i in range(6):
        await log.append(entry(i))
    db = tmp_path / "pincer.db"
    conn = sqlite3.connect(db)
    rows = {r[0]: r[1:] for r in conn.execute("SELECT * FROM audit WHERE id IN (2, 5)")}
    cols = [c[1] for c in conn.execute("PRAGMA table_info(audit)")][1:]
    for target, source in ((2, 5), (5, 2)):
        conn.execute(f"UPDATE audit SET {', '.join(c + ' = ?' for c in cols)} WHERE id = ?", (*rows[source], target))
    conn.commit()
    conn.close()
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 2


@pytest.mark.anyio
async def test_verify_detects_truncated_tail(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path))
    for i in range(4):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "DELETE FROM audit WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        log.verify()
    assert info.value.record_id == 4


@pytest.mark.anyio
async def test_two_writers_on_one_file_keep_one_chain(tmp_path: Path) -> None:
    first, second = AuditLog(open_database(tmp_path)), AuditLog(open_database(tmp_path))
    for i in range(10):
        await (first if i % 2 else second).append(entry(i))
    assert first.verify() == 10


@pytest.mark.anyio
async def test_filters_and_seeds(log: AuditLog) -> None:
    for i in range(6):
        await log.append(entry(i, session="a" if i < 2 else "b"))
    assert len(log.records(session="a")) == 2
    assert len(log.records(tool="t0")) == 2
    assert len(log.records(limit=3)) == 3
    assert len(log.timestamps("t1", since=0)) == 2
    await log.append(entry(9, grant_id="g-1"))
    assert log.grant_uses("g-1") == 1


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = open_database(tmp_path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    from pincer.core.errors import StoreError

    with pytest.raises(StoreError, match="newer pincer"):
        open_database(tmp_path)


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "pincer.db").write_bytes(b"this is not sqlite" * 100)
    from pincer.core.errors import StoreError

    with pytest.raises(StoreError, match="cannot open the pincer database"):
        open_database(tmp_path)
