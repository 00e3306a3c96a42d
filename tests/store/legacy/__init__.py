"""Databases as the pincer before the one store history wrote them (made by make_fixtures.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent
AUDIT_KEY = b"m" * 32  # the key the fixtures' audit records are chained under
_EMPTIED = (
    "audit", "approvals", "grants", "idempotency", "runs", "run_messages", "trigger_jobs", "trigger_firings",
    "trigger_deliveries", "trigger_lease", "ui_sign_ins",
)  # fmt: skip


def main_sqlite(home: Path, *, empty: bool = False) -> Path:
    """``home/pincer.db`` as that pincer left it (user_version 7); ``empty``: its schema only,
    the audit head at the genesis and the chain marker pending, as a new database of it was."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "pincer.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript((HERE / "main-sqlite.sql").read_text())
    if empty:
        conn.execute("BEGIN")
        for table in _EMPTIED:
            conn.execute(f"DELETE FROM {table}")
        conn.execute("UPDATE audit_head SET last_id = 0, last_hash = ?, mac = NULL", ("0" * 64,))
        conn.execute("UPDATE audit_chain SET keyed_from = NULL, key_id = NULL, plain_head = NULL, mac = NULL, "
                     "head_keyed = 0")  # fmt: skip
        conn.execute("COMMIT")
    conn.close()
    return path


def main_postgres_sql() -> str:
    """SQL that makes a PostgreSQL database as that pincer left it (pincer_schema 6)."""
    return (HERE / "main-postgres.sql").read_text()
