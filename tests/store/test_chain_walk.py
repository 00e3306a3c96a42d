"""The audit chain walk itself (store/chain_walk.py), on rows built here: every way a log can be
cut, reordered or rewritten is named at the record where it shows. ``AuditLog.verify`` runs this
walk in a worker process (anyio.to_process), whose coverage data is lost when anyio kills its
workers; here it runs in the test's own process, and through ``check_batch`` as a worker does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pincer.core.errors import AuditChainBroken, StoreError
from pincer.store.audit_archive import read_archive, write_segment
from pincer.store.chain import GENESIS_HASH, KEY_BYTES, ChainKey, plain_chain_hash
from pincer.store.chain_walk import RECORD_FIELDS, ChainWalk, check_batch, hashed

KEY = b"k" * KEY_BYTES
CHAIN_KEY = ChainKey(KEY)


def fields(record_id: int) -> tuple[Any, ...]:
    values: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    values.update(ts=1_700_000_000.0 + record_id, session="main", caller="api", tool=f"tool{record_id}",
                  kind="call", decision="allow", outcome="ok", args={"n": record_id}, effects=[])  # fmt: skip
    return tuple(values[name] for name in RECORD_FIELDS)


def chain(count: int, keyed_from: int) -> tuple[list[list[Any]], str]:
    """``count`` rows, plain (sha256) before ``keyed_from`` and MACed from it, and the plain head
    (the chain value of record ``keyed_from - 1``) a marker would hold."""
    rows: list[list[Any]] = []
    prev, plain_head = GENESIS_HASH, GENESIS_HASH
    for record_id in range(1, count + 1):
        run_id, person = (f"run-{record_id}", "ada") if record_id % 2 else (None, None)
        values = hashed(fields(record_id), run_id, person, None)
        if record_id < keyed_from:
            digest = plain_chain_hash(record_id, values, prev)
            plain_head = digest
        else:
            digest = CHAIN_KEY.record_hash(record_id, values, prev)
        rows.append([record_id, *fields(record_id), prev, digest, run_id, person, None])
        prev = digest
    return rows, plain_head


def walk(rows: list[list[Any]], keyed_from: int, plain_head: str) -> ChainWalk:
    walker = ChainWalk(key=CHAIN_KEY, keyed_from=keyed_from, plain_head=plain_head)
    for start in range(0, len(rows), 3):  # in batches, as verify reads them
        walker.check(rows[start : start + 3])
    walker.finish()
    return walker


def test_an_untouched_chain_walks_to_its_end() -> None:
    rows, plain_head = chain(8, keyed_from=4)
    walker = walk(rows, 4, plain_head)
    assert (walker.count, walker.prev) == (8, rows[-1][-4])


def test_a_deleted_record_is_named() -> None:
    rows, plain_head = chain(8, keyed_from=4)
    del rows[5]
    with pytest.raises(AuditChainBroken, match="audit record 6 is missing \\(next present is 7\\)") as info:
        walk(rows, 4, plain_head)
    assert info.value.record_id == 6 and "deleted" in (info.value.hint or "")


@pytest.mark.parametrize("keyed_from", [1, 4, 9])
def test_an_altered_field_is_named_in_the_plain_and_the_keyed_part(keyed_from: int) -> None:
    rows, plain_head = chain(8, keyed_from=keyed_from)
    rows[1][RECORD_FIELDS.index("tool") + 1] = "rewritten"
    rows[6][RECORD_FIELDS.index("outcome") + 1] = "error"
    with pytest.raises(AuditChainBroken, match="audit record 2 was altered"):  # the first of the two
        walk(rows, keyed_from, plain_head)


def test_a_record_whose_previous_hash_was_rewritten_is_named() -> None:
    rows, plain_head = chain(8, keyed_from=1)
    rows[4][-5] = "f" * 64
    with pytest.raises(AuditChainBroken, match="audit record 5 does not follow record 4") as info:
        walk(rows, 1, plain_head)
    assert "reordered or rewritten" in (info.value.hint or "")


def test_plain_records_rewritten_whole_do_not_end_where_the_marker_says() -> None:
    """Records before the log was keyed carry no MAC: anyone can rewrite them and their sha256
    chain consistently. The marker's plain head, under the key, catches it."""
    rows, plain_head = chain(8, keyed_from=4)
    forged, _ = chain(3, keyed_from=99)
    forged[0][RECORD_FIELDS.index("tool") + 1] = "forged"
    prev = GENESIS_HASH
    for row in forged:  # re-chained consistently, as a forger without the key would
        values = hashed(tuple(row[1 : 1 + len(RECORD_FIELDS)]), row[-3], row[-2], row[-1])
        row[-5], row[-4] = prev, plain_chain_hash(row[0], values, prev)
        prev = row[-4]
    with pytest.raises(AuditChainBroken, match="the records before 4 .* were altered") as info:
        walk(forged + rows[3:], 4, plain_head)
    assert info.value.record_id == 3 and "checkpoint" in (info.value.hint or "")
    with pytest.raises(AuditChainBroken, match="the records before 4 .* were altered"):
        walk(forged, 4, plain_head)  # the same, with the keyed records cut off


def test_a_log_cut_shorter_than_when_it_was_keyed_is_refused() -> None:
    rows, plain_head = chain(8, keyed_from=6)
    with pytest.raises(AuditChainBroken, match="the audit log ends at record 3, but 5 records were there") as info:
        walk(rows[:3], 6, plain_head)
    assert info.value.record_id == 4 and "removed from the end" in (info.value.hint or "")


def test_check_batch_answers_as_a_worker_process_does() -> None:
    rows, plain_head = chain(6, keyed_from=2)
    assert check_batch(KEY, 2, plain_head, 0, GENESIS_HASH, rows) == ("ok", 6, rows[-1][-4])
    first, rest = rows[:3], rows[3:]
    ok, count, prev = check_batch(KEY, 2, plain_head, 0, GENESIS_HASH, first)
    assert (ok, count) == ("ok", 3)
    assert check_batch(KEY, 2, plain_head, count, str(prev), rest)[:2] == ("ok", 6)
    rest[0][RECORD_FIELDS.index("args") + 1] = {"n": "tampered"}
    verdict, record_id, text = check_batch(KEY, 2, plain_head, count, str(prev), rest)
    assert (verdict, record_id) == ("broken", 4)
    message, _, hint = str(text).partition("\0")
    assert message == "audit record 4 was altered (its hash does not match its content)" and hint == ""


def test_another_key_fails_at_the_first_keyed_record() -> None:
    rows, plain_head = chain(5, keyed_from=3)
    other = ChainWalk(key=ChainKey(b"o" * KEY_BYTES), keyed_from=3, plain_head=plain_head)
    with pytest.raises(AuditChainBroken, match="audit record 3 was altered"):
        other.check(rows)


@pytest.mark.parametrize("key", [b"short", "k" * KEY_BYTES, b"k" * (KEY_BYTES + 1)])
def test_a_chain_key_must_be_its_size_in_bytes(key: Any) -> None:
    with pytest.raises(StoreError, match=f"the audit key must be {KEY_BYTES} bytes"):
        ChainKey(key)


# -- archive segments (store/audit_archive.py) ---------------------------------------------------------


def test_archive_segments_must_continue_one_another(tmp_path: Path) -> None:
    rows, _ = chain(6, keyed_from=1)
    write_segment(tmp_path, CHAIN_KEY, rows[:3], prev_hash=GENESIS_HASH, now=0.0)
    second = write_segment(tmp_path, CHAIN_KEY, rows[3:], prev_hash=rows[2][-4], now=0.0)
    assert [(s.first_id, s.last_id) for s in read_archive(tmp_path, CHAIN_KEY)] == [(1, 3), (4, 6)]
    second.unlink()
    write_segment(tmp_path, CHAIN_KEY, rows[3:], prev_hash="f" * 64, now=0.0)  # signed, but not the chain's head
    with pytest.raises(AuditChainBroken, match="segment audit-000000000004-000000000006.jsonl does not continue") as info:
        read_archive(tmp_path, CHAIN_KEY)
    assert info.value.record_id == 4 and "restore the archive directory" in (info.value.hint or "")


def test_a_segment_whose_signed_header_names_no_records_is_refused(tmp_path: Path) -> None:
    rows, _ = chain(3, keyed_from=1)
    write_segment(tmp_path, CHAIN_KEY, [rows[2], rows[0]], prev_hash=GENESIS_HASH, now=0.0)  # ids 3 then 1
    with pytest.raises(AuditChainBroken, match="header names no records"):
        read_archive(tmp_path, CHAIN_KEY)
