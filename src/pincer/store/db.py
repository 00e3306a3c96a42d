"""The embedded SQLite database under PINCER_HOME: one file, WAL, schema by user_version.

Why one connection used from the event-loop thread: an insert-and-commit costs ~30 us here, a
hop to a worker thread costs more than that. Every statement is short and bounded; the only
long wait is SQLite's busy timeout when another process holds the write lock.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from pincer.core.errors import StoreError

logger = logging.getLogger(__name__)

__all__ = ["open_database", "integrity_problems", "DB_FILENAME", "BUSY_TIMEOUT_MS"]

DB_FILENAME = "pincer.db"
BUSY_TIMEOUT_MS = 5_000

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    session TEXT NOT NULL,
    caller TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    grant_id TEXT,
    outcome TEXT NOT NULL,
    error_code TEXT,
    error TEXT,
    args TEXT NOT NULL,
    effects TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    usage TEXT NOT NULL,
    idempotency_key TEXT,
    cached INTEGER NOT NULL,
    approval_id TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
-- One index only: every index is one more page written per commit, on the hot path. Listing by
-- session and counting a grant's uses (once per process) scan instead.
CREATE INDEX IF NOT EXISTS audit_tool_ts ON audit (tool, ts);
CREATE TABLE IF NOT EXISTS audit_head (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    last_id INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT OR IGNORE INTO audit_head (one, last_id, last_hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
-- The head moves with every insert in the same statement, so one INSERT is one whole append.
CREATE TRIGGER IF NOT EXISTS audit_head_advance AFTER INSERT ON audit BEGIN
    UPDATE audit_head SET last_id = NEW.id, last_hash = NEW.hash WHERE one = 1;
END;
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    effects TEXT NOT NULL,
    hosts TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    answered_at REAL,
    answered_by TEXT
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    tool TEXT NOT NULL,
    key TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (tool, key)
);
CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at);
"""

# v2 (hardening): idempotency keys belong to a session (no session can see or block another's
# keys; the entries live minutes, so the old table is simply replaced); approvals remember the
# kind of the session that asked, how far an "allow always" reaches, what else the person was
# shown, and which process waits on them (an approval whose caller is gone cannot be answered).
_SCHEMA_V2 = """
DROP TABLE IF EXISTS idempotency;
CREATE TABLE idempotency (
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    key TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (session, tool, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
ALTER TABLE approvals ADD COLUMN session_kind TEXT NOT NULL DEFAULT 'main';
ALTER TABLE approvals ADD COLUMN scope TEXT;
ALTER TABLE approvals ADD COLUMN detail TEXT NOT NULL DEFAULT '{}';
ALTER TABLE approvals ADD COLUMN waiter TEXT;
"""

# Each entry takes the schema from its index to the next version, in one transaction.
_MIGRATIONS: tuple[str, ...] = (_SCHEMA_V1, _SCHEMA_V2)
_SCHEMA_VERSION = len(_MIGRATIONS)


def open_database(home: Path, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """Open (and create or migrate) the database. ``synchronous`` NORMAL makes a commit durable
    against a crash of pincer; FULL also against power loss, at an fsync per commit."""
    path = home / DB_FILENAME
    try:
        home.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise StoreError(
                f"{path} was written by a newer pincer (schema {version}, this one knows {_SCHEMA_VERSION})",
                hint="upgrade pincer or point PINCER_HOME elsewhere",
            )
        for target in range(version + 1, _SCHEMA_VERSION + 1):
            # One script, one transaction per step: a crash mid-migration leaves the schema of
            # the step before intact.
            script = _MIGRATIONS[target - 1]
            try:
                conn.executescript(f"BEGIN IMMEDIATE;{script}PRAGMA user_version={target};COMMIT;")
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return conn
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc}",
            hint="check that the file is a pincer database and the directory is writable",
        ) from exc


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
