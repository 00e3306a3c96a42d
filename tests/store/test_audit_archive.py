"""The audit log leaves the database only through signed archive segments (issue 35 item 5).

``archive()`` writes the oldest records into segment files, reads them back, and only then moves
the signed ``archived`` mark and deletes exactly the records it covers. ``verify_chain(archive=)``
walks the archive and the database as one chain. Attacks: a record, a header or the order of
records altered in a segment; a segment missing (in the middle, at the end); rows deleted from
the database without an archive (before or after the mark); the mark forged; pruning by
``[retention]``. Both databases.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import AuditChainBroken
from pincer.store import AuditLog
from pincer.store.audit import AuditEntry
from pincer.store.audit_archive import SEGMENT_RECORDS
from pincer.store.retention import prune
from tests.store.conftest import Backend

RECORDS = SEGMENT_RECORDS + 300  # two segments


def _entry(i: int, ts: float = 0.0) -> AuditEntry:
    return AuditEntry(session="main", caller="test", tool="echo", decision="allow", reason="r", outcome="ok",
                      args={"i": i}, ts=ts)  # fmt: skip


async def _fill(audit: AuditLog, count: int, first: int = 0, ts: float = 0.0) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(first, first + count):
            tg.start_soon(audit.append, _entry(i, ts))


def _count(backend: Backend, audit_sql: str = "SELECT COUNT(*), MIN(id) FROM audit") -> tuple[int, int | None]:
    import sqlite3

    if backend.kind == "sqlite":
        with sqlite3.connect(backend._tmp / "pincer.db") as conn:
            row = conn.execute(audit_sql).fetchone()
    else:
        import psycopg

        with psycopg.connect(backend.url) as conn:
            row = conn.execute(audit_sql).fetchone()
    assert row is not None
    return int(row[0]), row[1]


@pytest.fixture
async def archived(backend: Backend, tmp_path: Path) -> tuple[AuditLog, Path]:
    audit = await backend.audit()
    await _fill(audit, RECORDS)
    directory = tmp_path / "archive"
    done = await audit.archive(directory)
    assert (done.first_id, done.last_id, len(done.segments)) == (1, RECORDS, 2)
    await _fill(audit, 5, first=RECORDS)
    return audit, directory


@pytest.mark.anyio
async def test_archived_records_leave_the_database_and_verify_across_the_archive(
    backend: Backend, archived: tuple[AuditLog, Path]
) -> None:
    audit, directory = archived
    assert _count(backend) == (5, RECORDS + 1)  # only the records after the archive are left
    assert (await audit.verify_chain()).records == RECORDS + 5  # from the signed mark on
    assert (await audit.verify_chain(archive=directory)).records == RECORDS + 5
    header = json.loads(sorted(directory.iterdir())[1].read_text().split("\n", 1)[0])
    assert header["first_id"] == SEGMENT_RECORDS + 1 and len(header["prev_hash"]) == 64  # the head it continues
    again = await audit.archive(directory)  # the 5 new ones: a third segment continuing the second
    assert (again.first_id, again.last_id) == (RECORDS + 1, RECORDS + 5)
    assert (await audit.verify_chain(archive=directory)).records == RECORDS + 5 and _count(backend)[0] == 0


@pytest.mark.anyio
async def test_an_altered_record_or_header_in_a_segment_is_detected(archived: tuple[AuditLog, Path]) -> None:
    audit, directory = archived
    first = sorted(directory.iterdir())[0]
    original = first.read_text()
    altered = original.replace('"main","test","echo"', '"main","test","ecHo"', 1)
    assert altered != original
    first.write_text(altered)
    with pytest.raises(AuditChainBroken, match="records were altered"):
        await audit.verify_chain(archive=directory)
    header, rest = original.split("\n", 1)
    first.write_text(header.replace('"records":10000', '"records":9999') + "\n" + rest)
    with pytest.raises(AuditChainBroken, match="header was altered"):
        await audit.verify_chain(archive=directory)


@pytest.mark.anyio
async def test_reordered_records_in_a_segment_are_detected(archived: tuple[AuditLog, Path]) -> None:
    audit, directory = archived
    first = sorted(directory.iterdir())[0]
    header, *lines = first.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    first.write_text("\n".join([header, *lines]) + "\n")
    with pytest.raises(AuditChainBroken):
        await audit.verify_chain(archive=directory)


@pytest.mark.anyio
async def test_a_missing_segment_is_detected_in_the_middle_and_at_the_end(
    archived: tuple[AuditLog, Path], tmp_path: Path
) -> None:
    audit, directory = archived
    await audit.archive(directory)  # three segments now
    first, second, third = sorted(directory.iterdir())
    second.rename(tmp_path / second.name)
    with pytest.raises(AuditChainBroken, match=f"records {SEGMENT_RECORDS + 1} to {RECORDS} is missing"):
        await audit.verify_chain(archive=directory)
    (tmp_path / second.name).rename(second)
    third.unlink()
    with pytest.raises(AuditChainBroken, match=f"archive ends at record {RECORDS}"):
        await audit.verify_chain(archive=directory)
    first.unlink()
    second.unlink()
    with pytest.raises(AuditChainBroken, match="segments of records 1 to"):
        await audit.verify_chain(archive=directory)


@pytest.mark.anyio
async def test_rows_deleted_without_an_archive_are_detected(backend: Backend) -> None:
    audit = await backend.audit()
    await _fill(audit, 40)
    backend.tamper("DELETE FROM audit WHERE id <= 10")
    with pytest.raises(AuditChainBroken, match="audit record 1 is missing"):
        await audit.verify_chain()


@pytest.mark.anyio
async def test_rows_deleted_past_the_archived_mark_or_a_forged_mark_are_detected(
    backend: Backend, archived: tuple[AuditLog, Path]
) -> None:
    audit, _ = archived
    backend.tamper(f"DELETE FROM audit WHERE id <= {RECORDS + 2}")
    with pytest.raises(AuditChainBroken, match=f"audit record {RECORDS + 1} is missing"):
        await audit.verify_chain()
    backend.tamper(f"UPDATE audit_marks SET last_id = {RECORDS + 2} WHERE name = 'archived'")
    with pytest.raises(AuditChainBroken, match="'archived' mark was altered"):
        await audit.verify_chain()


@pytest.mark.anyio
async def test_a_failed_archive_leaves_every_record_and_pruning_never_touches_the_log(
    backend: Backend, tmp_path: Path
) -> None:
    audit = await backend.audit()
    await _fill(audit, 30, ts=1_000.0)  # 1970: older than any retention
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    with pytest.raises(OSError):
        await audit.archive(blocked)
    assert _count(backend) == (30, 1)
    pruned = await prune(audit._db, now=10**10, approvals_days=1, runs_days=1, webhook_payloads_days=1)
    assert pruned.approvals == 0 and _count(backend) == (30, 1)
    assert (await audit.verify_chain()).records == 30


@pytest.mark.anyio
async def test_archive_before_a_time_moves_only_the_older_records(backend: Backend, tmp_path: Path) -> None:
    audit = await backend.audit()
    await _fill(audit, 20, ts=1_000.0)
    await _fill(audit, 7, first=20, ts=2_000.0)
    done = await audit.archive(tmp_path / "a", before=1_500.0)
    assert (done.first_id, done.last_id) == (1, 20) and _count(backend) == (7, 21)
    assert (await audit.archive(tmp_path / "a", before=1_500.0)).records == 0
    assert (await audit.verify_chain(archive=tmp_path / "a")).records == 27


@pytest.mark.anyio
async def test_a_checkpoint_of_archived_records_verifies_with_the_archive(backend: Backend, tmp_path: Path) -> None:
    from pincer.core.errors import UsageError

    audit = await backend.audit()
    await _fill(audit, 12)
    checkpoint = await audit.checkpoint()
    await audit.archive(tmp_path / "a")
    with pytest.raises(UsageError, match="was archived out of the database"):
        await audit.verify_checkpoint(checkpoint)
    assert (await audit.verify_checkpoint(checkpoint, archive=tmp_path / "a")).records == 12


@pytest.mark.anyio
async def test_an_archive_that_is_no_folder_is_named_with_what_to_pass(
    archived: tuple[AuditLog, Path], tmp_path: Path
) -> None:
    audit, directory = archived
    first = sorted(directory.iterdir())[0]
    with pytest.raises(AuditChainBroken, match=f"the audit archive {first} is not a directory") as info:
        await audit.verify_chain(archive=first)
    assert "pincer audit archive DIR" in (info.value.hint or "")


@pytest.mark.anyio
async def test_a_segment_copied_in_twice_a_header_replaced_or_its_key_renamed_is_detected(
    archived: tuple[AuditLog, Path],
) -> None:
    audit, directory = archived
    first = sorted(directory.iterdir())[0]
    original = first.read_bytes()
    twice = directory / "audit-000000000001-000000000002.jsonl"  # a name of the archive's; the first's records
    twice.write_bytes(original)
    with pytest.raises(AuditChainBroken, match="is overlapping the one before"):
        await audit.verify_chain(archive=directory)
    twice.unlink()
    header, rest = original.split(b"\n", 1)
    first.write_bytes(b"not a header\n" + rest)
    with pytest.raises(AuditChainBroken, match=f"segment {first.name} has no pincer-audit-segment/1 header"):
        await audit.verify_chain(archive=directory)
    fields = json.loads(header)
    first.write_bytes(json.dumps({**fields, "key_id": "0" * len(fields["key_id"])}).encode() + b"\n" + rest)
    with pytest.raises(AuditChainBroken, match=f"was signed with audit key {'0' * len(fields['key_id'])}, not "):
        await audit.verify_chain(archive=directory)
    first.write_bytes(original)
    assert await audit.verify_chain(archive=directory)  # put back, it verifies again
