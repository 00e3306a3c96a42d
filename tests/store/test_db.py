"""The database file itself: private, never opened through a link, and opened again by the same
process without losing what SQLite holds for it."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pincer.core.errors import StoreError
from pincer.store.approvals import ApprovalStore
from pincer.store.db import DB_FILENAME
from pincer.store.sql import Sql
from pincer.store.sql.migrate import prepare_sqlite
from tests.store.conftest import Opener
from tests.store.legacy import main_sqlite

pytestmark = pytest.mark.anyio
GRANTS = Sql("SELECT id FROM grants ORDER BY id")


async def test_the_database_and_its_journal_are_private(tmp_path: Path, opened: Opener) -> None:
    db = await opened.db(tmp_path)
    await db.execute(Sql("INSERT INTO grants (id, created_at, body) VALUES ('g', 0, '{}')"))
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir() if p.name.startswith(DB_FILENAME)}
    assert modes[DB_FILENAME] == 0o600 and f"{DB_FILENAME}-wal" in modes
    assert all(mode == 0o600 for mode in modes.values()), modes


def test_a_symlink_at_the_database_name_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / DB_FILENAME).symlink_to(target)
    with pytest.raises(StoreError, match="cannot open the pincer database"):
        prepare_sqlite(tmp_path / "home" / DB_FILENAME)
    assert not target.exists()


async def test_a_database_of_schema_5_migrates_and_keeps_its_approvals(tmp_path: Path, opened: Opener) -> None:
    """A database written before approvals named their run (schema 5) opens: its requests read
    back with no run, and new ones keep theirs."""
    conn = sqlite3.connect(main_sqlite(tmp_path, empty=True), isolation_level=None)
    conn.executescript(
        "BEGIN; ALTER TABLE approvals DROP COLUMN run_id; ALTER TABLE approvals DROP COLUMN tainted_by;"
        " PRAGMA user_version = 5; COMMIT;"
    )
    conn.execute(
        "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
        "VALUES ('old1', 1, 9e12, 'main', 'write_file', '{}', '[]', '[]', 'asks by default', 'pending')"
    )
    conn.close()
    store = ApprovalStore(await opened.db(tmp_path))
    old = await store.get("old1")
    assert old.run_id is None and old.tainted_by is None and old.tool == "write_file"
    assert old.caller is None and not old.gone_recorded
    new = await store.create(session="main", tool="http", args={}, effects=(), hosts=(), reason="r", timeout_s=5,
                             run_id="run-1", tainted_by="the output of http (audit record 3)")  # fmt: skip
    reread = await ApprovalStore(await opened.db(tmp_path)).get(new.id)
    assert reread.run_id == "run-1" and reread.tainted_by == "the output of http (audit record 3)"
    assert reread.to_dict()["run_id"] == "run-1"


async def test_a_second_open_in_a_process_that_has_the_database_open_keeps_its_locks(
    tmp_path: Path, opened: Opener
) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    included. An open that opened and closed pincer.db itself while this process had it open
    (the audit writer's second connection with ``[audit] synchronous = "full"``, before) left
    the first connection unlocked; the next process to connect took itself for the only one and
    reset the WAL index, and this process's next connection failed with "disk I/O error"."""
    held = await opened.db(tmp_path)  # the gateway's database
    second = await opened.db(tmp_path, synchronous="FULL")  # and a second one in the same process
    path = tmp_path / DB_FILENAME
    other = f"import sqlite3; c = sqlite3.connect({str(path)!r}); c.execute(\"INSERT INTO grants VALUES ('b', 0, 'x')\"); c.commit()"
    subprocess.run([sys.executable, "-c", other], check=True, timeout=60)
    await held.execute(Sql("INSERT INTO grants VALUES ('a', 0, '{}')"))
    with sqlite3.connect(path) as fresh:
        assert sorted(fresh.execute("SELECT id FROM grants").fetchall()) == [("a",), ("b",)]
    assert await second.fetch_all(GRANTS) == [("a",), ("b",)]
