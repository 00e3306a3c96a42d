"""The embedded SQLite database under PINCER_HOME, seen from outside the stores: its file name,
and whether SQLite finds it intact (``pincer doctor``). The stores reach it through the database
seam (store/sql/: store/sql/sqlite.py opens it, store/sql/migrate.py makes and migrates it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pincer.store.sql.migrate import DB_FILENAME
from pincer.store.sql.sqlite import BUSY_TIMEOUT_MS

__all__ = ["integrity_problems", "DB_FILENAME", "BUSY_TIMEOUT_MS"]


def integrity_problems(path: Path) -> list[str]:
    """What SQLite's ``PRAGMA quick_check`` finds wrong in the database file at ``path`` (empty:
    intact). Opened read-only, so a check neither creates, migrates nor locks it for writers."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [f"{type(exc).__name__}: {exc}"]
    return [] if rows == ["ok"] else rows
