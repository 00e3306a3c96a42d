from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import AuditChainBroken, CheckpointInvalid, StoreError
from pincer.store import AuditEntry, AuditLog
from pincer.store.checkpoint import MAX_CHECKPOINT_BYTES, AuditCheckpoint
from pincer.store.sql.migrate import prepare_sqlite
from tests.store.conftest import Opener
from tests.store.legacy import main_sqlite

KEY = b"a" * 32


def entry(i: int, **kw) -> AuditEntry:
    base = {"session": "main", "caller": "test", "tool": f"t{i % 3}", "decision": "allow", "reason": "r", "outcome": "ok", "args": {"i": i}}
    base.update(kw)
    return AuditEntry(**base)


@pytest.fixture
async def log(tmp_path: Path, opened: Opener) -> AuditLog:
    return await opened.audit(tmp_path, key=KEY)


@pytest.mark.anyio
async def test_sequential_appends_chain_and_verify(log: AuditLog) -> None:
    ids = [await log.append(entry(i)) for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]
    assert await log.verify() == 5
    records = await log.records()
    assert [r.args for r in records] == [{"i": i} for i in range(5)]
    assert records[1].prev_hash == records[0].hash


@pytest.mark.anyio
async def test_concurrent_appends_are_group_committed_and_all_durable(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    ids: list[int] = []

    async def one(i: int) -> None:
        ids.append(await log.append(entry(i)))

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(one, i)
    assert sorted(ids) == list(range(1, 65))
    # A second connection (another process's view) sees every record committed.
    other = await opened.audit(tmp_path, key=KEY)
    assert await other.verify() == 64


def _tamper(db: Path, sql: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql, params)
    conn.commit()
    conn.close()


@pytest.mark.anyio
async def test_verify_names_altered_record(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(6):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "UPDATE audit SET reason = 'nothing to see' WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 4
    assert "altered" in info.value.message


@pytest.mark.anyio
async def test_verify_names_deleted_record(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(6):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "DELETE FROM audit WHERE id = 3")
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 3


@pytest.mark.anyio
async def test_verify_detects_reordered_records(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
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
        await log.verify()
    assert info.value.record_id == 2


@pytest.mark.anyio
async def test_verify_detects_truncated_tail(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(4):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "DELETE FROM audit WHERE id = 4")
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 4


@pytest.mark.anyio
async def test_two_writers_on_one_file_keep_one_chain(tmp_path: Path, opened: Opener) -> None:
    first, second = await opened.audit(tmp_path, key=KEY), await opened.audit(tmp_path, key=KEY)
    for i in range(10):
        await (first if i % 2 else second).append(entry(i))
    assert await first.verify() == 10


@pytest.mark.anyio
async def test_filters_and_seeds(log: AuditLog) -> None:
    for i in range(6):
        await log.append(entry(i, session="a" if i < 2 else "b"))
    assert len(await log.records(session="a")) == 2
    assert len(await log.records(tool="t0")) == 2
    assert len(await log.records(limit=3)) == 3
    assert len(await log.timestamps("t1", since=0)) == 2
    await log.append(entry(9, grant_id="g-1"))
    assert await log.grant_uses("g-1") == 1


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    prepare_sqlite(tmp_path / "pincer.db")
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer pincer"):
        prepare_sqlite(tmp_path / "pincer.db")


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "pincer.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open the pincer database"):
        prepare_sqlite(tmp_path / "pincer.db")


# -- the keyed chain ---------------------------------------------------------------------------

OTHER_KEY = b"b" * 32
_COLUMNS = (
    "ts", "session", "caller", "tool", "kind", "decision", "reason", "grant_id", "outcome",
    "error_code", "error", "args", "effects", "duration_ms", "usage", "idempotency_key",
    "cached", "approval_id",
)  # fmt: skip


def _plain_hash(record_id: int, values: tuple, prev_hash: str) -> str:
    """The plain SHA-256 chain of pincer before the audit key, written out independently."""
    payload = json.dumps([record_id, prev_hash, *values], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _legacy_database(path: Path, count: int) -> None:
    """A schema-1 pincer.db with ``count`` plain-chained records, as an older pincer left it."""
    main_sqlite(path, empty=True)
    conn = sqlite3.connect(path / "pincer.db", isolation_level=None)
    conn.executescript("BEGIN; DROP TABLE audit_chain; PRAGMA user_version = 1; COMMIT;")
    _append_plain(conn, range(1, count + 1), "0" * 64)
    conn.close()


def _append_plain(conn: sqlite3.Connection, ids: range, prev: str) -> str:
    for record_id in ids:
        values = (1000.0 + record_id, "main", "test", "t", "call", "allow", "r", None, "ok",
                  None, None, f'{{"i":{record_id}}}', "[]", 0.0, "{}", None, 0, None)  # fmt: skip
        digest = _plain_hash(record_id, values, prev)
        conn.execute(
            f"INSERT INTO audit (id, {', '.join(_COLUMNS)}, prev_hash, hash) VALUES ({', '.join('?' * 21)})",
            (record_id, *values, prev, digest),
        )
        prev = digest
    return prev


def _rechain_plain(db: Path, from_id: int) -> None:
    """Recompute the plain chain from ``from_id`` on and move the head (what a forger does)."""
    conn = sqlite3.connect(db)
    prev_row = conn.execute("SELECT hash FROM audit WHERE id = ?", (from_id - 1,)).fetchone()
    prev = prev_row[0] if prev_row else "0" * 64
    rows = conn.execute(f"SELECT id, {', '.join(_COLUMNS)} FROM audit WHERE id >= ? ORDER BY id", (from_id,))
    for row in rows.fetchall():
        digest = _plain_hash(row[0], tuple(row[1:]), prev)
        conn.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, row[0]))
        prev = digest
    conn.execute("UPDATE audit_head SET last_hash = ?", (prev,))
    conn.commit()
    conn.close()


@pytest.mark.anyio
async def test_records_are_hmac_chained_under_the_key(log: AuditLog, tmp_path: Path) -> None:
    for i in range(3):
        await log.append(entry(i))
    head = await log.verify_chain()
    assert (head.records, head.keyed_from, head.plain_records) == (3, 1, 0)
    first = (await log.records())[0]
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        values = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM audit WHERE id = 1").fetchone()
    assert first.hash != _plain_hash(1, tuple(values), "0" * 64)
    assert head.key_id == log.key_id and len(log.key_id) == 16 and KEY.hex()[:16] != log.key_id


@pytest.mark.anyio
async def test_a_record_rechained_with_the_plain_recipe_is_caught(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(5):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "UPDATE audit SET outcome = 'denied' WHERE id = 2")
    _rechain_plain(tmp_path / "pincer.db", 2)
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id == 2 and "altered" in info.value.message


@pytest.mark.anyio
async def test_a_log_keyed_under_another_key_is_refused(tmp_path: Path, opened: Opener) -> None:
    await opened.audit(tmp_path, key=KEY)
    with pytest.raises(StoreError) as info:
        await opened.audit(tmp_path, key=OTHER_KEY)
    assert (await opened.audit(tmp_path, key=KEY)).key_id in info.value.message
    assert "PINCER_AUDIT_KEY" in (info.value.hint or "")


@pytest.mark.anyio
async def test_a_legacy_plain_log_is_adopted_and_keyed_from_its_next_record(tmp_path: Path, opened: Opener) -> None:
    _legacy_database(tmp_path, 4)
    log = await opened.audit(tmp_path, key=KEY)
    assert (await log.verify_chain()).to_dict() | {"key_id": "-"} == {
        "records": 4, "last_hash": (await log.records())[-1].hash, "keyed_from": 5, "plain_records": 4, "key_id": "-",
    }  # fmt: skip
    assert await log.append(entry(5)) == 5
    head = await log.verify_chain()
    assert (head.records, head.keyed_from, head.plain_records) == (5, 5, 4)
    # A second process on the same file agrees on where the keyed chain begins.
    assert (await (await opened.audit(tmp_path, key=KEY)).verify_chain()).keyed_from == 5


@pytest.mark.anyio
@pytest.mark.parametrize("keyed_records", [0, 2])
async def test_plain_records_cannot_be_edited_once_adopted(tmp_path: Path, keyed_records: int, opened: Opener) -> None:
    _legacy_database(tmp_path, 3)
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(keyed_records):
        await log.append(entry(i))
    _tamper(tmp_path / "pincer.db", "UPDATE audit SET reason = 'edited' WHERE id = 2")
    _rechain_plain(tmp_path / "pincer.db", 2)  # the plain part is consistent again on its own
    with pytest.raises(AuditChainBroken) as info:
        await log.verify()
    assert info.value.record_id in (3, 4)


@pytest.mark.anyio
async def test_keyed_records_cannot_be_downgraded_to_the_plain_chain(tmp_path: Path, opened: Opener) -> None:
    _legacy_database(tmp_path, 2)
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(3):
        await log.append(entry(i))
    db = tmp_path / "pincer.db"
    _tamper(db, "UPDATE audit SET reason = 'downgraded' WHERE id = 4")
    _rechain_plain(db, 3)
    # Moving the marker on to claim the records are plain breaks the marker's MAC.
    _tamper(db, "UPDATE audit_chain SET keyed_from = 6")
    with pytest.raises(AuditChainBroken, match="marker was altered"):
        await log.verify()
    _tamper(db, "UPDATE audit_chain SET keyed_from = 'three'")
    with pytest.raises(AuditChainBroken, match="marker was altered"):
        await log.verify()
    _tamper(db, "DELETE FROM audit_chain")
    with pytest.raises(AuditChainBroken, match="marker .* is missing"):
        await log.verify()
    # Reopening does not adopt the records again: the row is gone from a keyed schema.
    with pytest.raises(AuditChainBroken, match="missing"):
        await (await opened.audit(tmp_path, key=KEY)).verify()


# -- checkpoints -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_checkpoint_holds_while_the_log_grows(log: AuditLog) -> None:
    for i in range(3):
        await log.append(entry(i))
    checkpoint = await log.checkpoint()
    assert (checkpoint.records, checkpoint.last_id, checkpoint.keyed_from) == (3, 3, 1)
    assert checkpoint.last_hash == (await log.records())[-1].hash and checkpoint.key_id == log.key_id
    parsed = AuditCheckpoint.from_text(checkpoint.to_json())
    assert parsed == checkpoint
    await log.append(entry(9))
    assert (await log.verify_checkpoint(parsed)).records == 4


@pytest.mark.anyio
async def test_a_cut_tail_with_a_moved_head_fails_on_the_head_mac_and_against_a_checkpoint(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(5):
        await log.append(entry(i))
    checkpoint = await log.checkpoint()
    record_3 = (await log.records())[2]
    _tamper(tmp_path / "pincer.db", "DELETE FROM audit WHERE id > 3")
    _tamper(tmp_path / "pincer.db", "UPDATE audit_head SET last_id = 3, last_hash = ?", (record_3.hash,))
    with pytest.raises(AuditChainBroken, match="the audit head was altered") as info:
        await log.verify()
    assert info.value.record_id == 4
    with pytest.raises(AuditChainBroken) as info:
        await log.verify_checkpoint(checkpoint)
    assert info.value.record_id == 4 and "records 4 to 5 were deleted" in info.value.message


@pytest.mark.anyio
async def test_another_log_under_the_same_key_does_not_pass_for_the_checkpointed_one(tmp_path: Path, opened: Opener) -> None:
    first = await opened.audit(tmp_path / "a", key=KEY)
    second = await opened.audit(tmp_path / "b", key=KEY)
    for i in range(3):
        await first.append(entry(i))
        await second.append(entry(i, reason="something else"))
    with pytest.raises(AuditChainBroken, match="not the one the checkpoint"):
        await second.verify_checkpoint(await first.checkpoint())


@pytest.mark.anyio
async def test_a_stripped_marker_and_replayed_plain_log_fails_against_a_checkpoint(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
    for i in range(3):
        await log.append(entry(i))
    checkpoint = await log.checkpoint()
    db = tmp_path / "pincer.db"
    conn = sqlite3.connect(db, isolation_level=None)
    # The marker put back to pending, as an older database's migration leaves it.
    conn.execute("UPDATE audit_chain SET keyed_from = NULL, key_id = NULL, plain_head = NULL, mac = NULL, head_keyed = 0")
    conn.close()
    _rechain_plain(db, 1)
    reopened = await opened.audit(tmp_path, key=KEY)
    assert (await reopened.verify_chain()).plain_records == 3  # alone it looks like an upgraded old log
    with pytest.raises(AuditChainBroken, match="keyed chain begins at record 4"):
        await reopened.verify_checkpoint(checkpoint)


@pytest.mark.anyio
async def test_a_checkpoint_altered_or_signed_by_another_key_is_invalid(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path / "a", key=KEY)
    await log.append(entry(1))
    document = (await log.checkpoint()).to_dict()
    lowered = AuditCheckpoint.from_text(json.dumps({**document, "records": 0, "last_id": 0}))
    with pytest.raises(CheckpointInvalid, match="signature does not match"):
        await log.verify_checkpoint(lowered)
    foreign = await opened.audit(tmp_path / "b", key=OTHER_KEY)
    with pytest.raises(CheckpointInvalid, match="signed with audit key") as info:
        await foreign.verify_checkpoint(AuditCheckpoint.from_text(json.dumps({"checkpoint": document})))
    assert "PINCER_AUDIT_KEY" in (info.value.hint or "")


@pytest.mark.anyio
async def test_an_empty_log_has_a_checkpoint_too(log: AuditLog) -> None:
    checkpoint = await log.checkpoint()
    assert (checkpoint.records, checkpoint.last_hash) == (0, "0" * 64)
    assert (await log.verify_checkpoint(checkpoint)).records == 0


json_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=80),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=20,
)
checkpoint_like = st.fixed_dictionaries(
    {"format": st.sampled_from(["pincer-audit-checkpoint/1", "other"])},
    optional={
        "records": st.integers(-2, 5) | st.booleans() | st.text(max_size=3),
        "last_id": st.integers(-2, 5),
        "last_hash": st.text("0123456789abcdefABCDEF", max_size=70),
        "keyed_from": st.integers(-1, 5) | st.floats(),
        "key_id": st.text("0123456789abcdef", max_size=20),
        "created_at": st.text(max_size=30) | st.just("2026-12-01T08:40:00.123456Z"),
        "signature": st.text(max_size=90) | st.just("hmac-sha256:" + "0" * 64),
    },
)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200), json_documents.map(json.dumps),
                      checkpoint_like.map(json.dumps)))  # fmt: skip
def test_any_input_to_the_checkpoint_parser_raises_only_its_error(text: str | bytes) -> None:
    try:
        parsed = AuditCheckpoint.from_text(text)
    except CheckpointInvalid as exc:
        assert exc.message and exc.code == "checkpoint_invalid"
    else:
        assert parsed.records == parsed.last_id >= 0


def test_a_huge_checkpoint_file_is_refused_unread() -> None:
    with pytest.raises(CheckpointInvalid, match="larger than"):
        AuditCheckpoint.from_text("[" * (MAX_CHECKPOINT_BYTES + 1))


def test_the_record_mac_is_standard_hmac_sha256() -> None:
    """The chain value is HMAC-SHA256 as any library computes it (RFC 2104), label included."""
    import hmac

    from pincer.store.chain import ChainKey

    values = (1.5, "main", "tést", None, 0)
    payload = json.dumps([7, "0" * 64, *values], separators=(",", ":"), ensure_ascii=False).encode()
    expected = hmac.new(KEY, b"pincer audit record v2\n" + payload, "sha256").hexdigest()
    assert ChainKey(KEY).record_hash(7, values, "0" * 64) == expected
