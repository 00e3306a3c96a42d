"""The database file itself: private, and migrated step by step."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pincer.core.errors import StoreError
from pincer.store.db import DB_FILENAME, open_database


def test_the_database_and_its_journal_are_private(tmp_path: Path) -> None:
    conn = open_database(tmp_path)
    conn.execute("INSERT INTO grants (id, created_at, body) VALUES ('g', 0, '{}')")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir() if p.name.startswith(DB_FILENAME)}
    conn.close()
    assert modes[DB_FILENAME] == 0o600
    assert all(mode == 0o600 for mode in modes.values()), modes


def test_a_symlink_at_the_database_name_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / DB_FILENAME).symlink_to(target)
    with pytest.raises(StoreError, match="cannot open the pincer database"):
        open_database(tmp_path / "home")
    assert not target.exists()


def test_a_database_of_schema_5_migrates_and_keeps_its_approvals(tmp_path: Path) -> None:
    """A database written before approvals named their run (schema 5) opens: its requests read
    back with no run, and new ones keep theirs."""
    import sqlite3

    from pincer.store.approvals import ApprovalStore

    conn = open_database(tmp_path)
    conn.executescript(
        "BEGIN; ALTER TABLE approvals DROP COLUMN run_id; ALTER TABLE approvals DROP COLUMN tainted_by;"
        " PRAGMA user_version = 5; COMMIT;"
    )
    conn.execute(
        "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
        "VALUES ('old1', 1, 9e12, 'main', 'write_file', '{}', '[]', '[]', 'asks by default', 'pending')"
    )
    conn.close()
    conn = open_database(tmp_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 9
    store = ApprovalStore(conn)
    old = store.get("old1")
    assert old.run_id is None and old.tainted_by is None and old.tool == "write_file"
    assert old.caller is None and not old.gone_recorded
    new = store.create(session="main", tool="http", args={}, effects=(), hosts=(), reason="r", timeout_s=5,
                       run_id="run-1", tainted_by="the output of http (audit record 3)")  # fmt: skip
    conn.close()
    reread = ApprovalStore(open_database(tmp_path)).get(new.id)
    assert reread.run_id == "run-1" and reread.tainted_by == "the output of http (audit record 3)"
    assert reread.to_dict()["run_id"] == "run-1"
    with sqlite3.connect(tmp_path / DB_FILENAME) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(approvals)")]
    assert columns[-2:] == ["run_id", "tainted_by"]
