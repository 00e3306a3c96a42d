"""Issue 20 item 10: the audit head was not keyed.

Before the fix ``audit_head`` (the last id and chain value) was a plain row: cutting the log's
tail and moving the head to the new last record (``delete from audit where id > 50; update
audit_head set last_id = 50, last_hash = ...``), or wiping the log (``delete from audit; delete
from audit_head``), left ``pincer audit verify`` saying "intact". The head now carries an HMAC
under the audit key (kept outside the database) over the last id (= the record count) and value.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
from pincer.store.anchor import ANCHOR_FILE
from pincer.store.chain import ChainKey
from tests.adversarial.test_secrets_and_audit import _calls, _cli

pytestmark = pytest.mark.anyio


def _sql(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def _verify(home: Path) -> tuple[int, dict[str, object]]:
    result = _cli(home, "audit", "verify", "--json")
    return result.returncode, json.loads(result.stdout)


async def test_a_cut_tail_with_the_head_moved_to_match_is_reported(tmp_path: Path) -> None:
    """Failed on main: records 4-6 deleted and the head set to record 3 verified as intact (3 records)."""
    await _calls(tmp_path, 6)
    db = tmp_path / "pincer.db"
    conn = sqlite3.connect(db)
    (last_hash,) = conn.execute("SELECT hash FROM audit WHERE id = 3").fetchone()
    conn.close()
    _sql(db, "DELETE FROM audit WHERE id > 3", f"UPDATE audit_head SET last_id = 3, last_hash = '{last_hash}'")
    code, report = _verify(tmp_path)
    assert code == 1 and report["ok"] is False, report
    message = report["error"]["message"]  # type: ignore[index]
    assert "head" in message and "altered" in message, message


async def test_a_wiped_log_is_reported(tmp_path: Path) -> None:
    """Failed on main: ``delete from audit; delete from audit_head`` verified as intact (0 records)."""
    await _calls(tmp_path, 3)
    _sql(tmp_path / "pincer.db", "DELETE FROM audit", "DELETE FROM audit_head")
    code, report = _verify(tmp_path)
    assert code == 1 and report["ok"] is False, report
    assert "head" in report["error"]["message"] and "missing" in report["error"]["message"]  # type: ignore[index]


async def test_a_head_reset_to_the_empty_log_is_reported(tmp_path: Path) -> None:
    """Failed on main: the head put back to its first value (id 0, genesis) after a wipe."""
    await _calls(tmp_path, 3)
    _sql(tmp_path / "pincer.db", "DELETE FROM audit", f"UPDATE audit_head SET last_id = 0, last_hash = '{'0' * 64}'")
    code, report = _verify(tmp_path)
    assert code == 1 and "head" in report["error"]["message"]  # type: ignore[index]


async def test_the_next_append_does_not_launder_a_cut_tail(tmp_path: Path) -> None:
    """A pincer that appends after the cut must not re-sign the moved head: still reported."""
    await _calls(tmp_path, 5)
    db = tmp_path / "pincer.db"
    conn = sqlite3.connect(db)
    (last_hash,) = conn.execute("SELECT hash FROM audit WHERE id = 2").fetchone()
    conn.close()
    _sql(db, "DELETE FROM audit WHERE id > 2", f"UPDATE audit_head SET last_id = 2, last_hash = '{last_hash}'")
    await _calls(tmp_path, 2)
    code, report = _verify(tmp_path)
    assert code == 1 and "head" in report["error"]["message"], report  # type: ignore[index]


async def test_an_intact_log_still_verifies_and_keeps_verifying_as_it_grows(tmp_path: Path) -> None:
    await _calls(tmp_path, 3)
    assert _verify(tmp_path) == (0, _verify(tmp_path)[1]) and _verify(tmp_path)[1]["records"] == 3
    await _calls(tmp_path, 2)
    code, report = _verify(tmp_path)
    assert code == 0 and report["records"] == 5


async def test_a_database_of_schema_4_upgrades_and_its_head_is_keyed(tmp_path: Path) -> None:
    """A log written before the head was keyed (schema 4: no head MAC, the marker's MAC without
    the head flag) opens, upgrades, verifies intact, and from then on a cut tail is reported."""
    await _calls(tmp_path, 4)
    db = tmp_path / "pincer.db"
    conn = sqlite3.connect(db)
    keyed_from, plain_head = conn.execute("SELECT keyed_from, plain_head FROM audit_chain").fetchone()
    key = load_or_create_key(tmp_path, None, place=AUDIT_KEY)
    old_mac = ChainKey(key).marker_mac(keyed_from=keyed_from, plain_head=plain_head)  # what schema 4 wrote
    conn.close()
    _sql(
        db,
        "ALTER TABLE audit_head DROP COLUMN mac",
        "ALTER TABLE audit_chain DROP COLUMN head_keyed",
        "ALTER TABLE audit_chain DROP COLUMN chain_id",
        f"UPDATE audit_chain SET mac = '{old_mac}'",
        "DROP TABLE alembic_version",  # schema 4 came before the one migration history
        "PRAGMA user_version = 4",
    )
    (tmp_path / ANCHOR_FILE).unlink()  # anchors came after schema 7
    code, report = _verify(tmp_path)  # opening it upgrades it: schema 5, the head keyed as it stands
    assert code == 0 and report["records"] == 4, report
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 5
    conn.close()
    await _calls(tmp_path, 1)
    code, report = _verify(tmp_path)
    assert code == 0 and report["records"] == 5, report
    conn = sqlite3.connect(db)
    (last_hash,) = conn.execute("SELECT hash FROM audit WHERE id = 4").fetchone()
    conn.close()
    _sql(db, "DELETE FROM audit WHERE id > 4", f"UPDATE audit_head SET last_id = 4, last_hash = '{last_hash}'")
    code, report = _verify(tmp_path)
    assert code == 1 and "head" in report["error"]["message"], report  # type: ignore[index]
