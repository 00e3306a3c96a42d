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
