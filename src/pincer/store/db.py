"""The embedded SQLite database under PINCER_HOME: one file, WAL, schema by user_version.

Why one connection used from the event-loop thread: an insert-and-commit costs ~30 us here, a
hop to a worker thread costs more than that. Every statement is short and bounded; the only
long wait is SQLite's busy timeout when another process holds the write lock.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from pincer.core.errors import StoreError
from pincer.store.open_lock import open_lock

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

# v2 (hardening): the audit chain is keyed (audit_chain marks where the keyed chain begins);
# idempotency keys belong to a session (no session can see or block another's
# keys; the entries live minutes, so the old table is simply replaced); approvals remember the
# kind of the session that asked, how far an "allow always" reaches, what else the person was
# shown, which process waits on them (an approval whose caller is gone cannot be answered), and,
# for an approval its caller left on purpose (when_no_elicitation = "return"), the call it
# belongs to, so that the same call made again after the answer uses it once.
_AUDIT_CHAIN_V2 = """
CREATE TABLE IF NOT EXISTS audit_chain (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    keyed_from INTEGER,
    key_id TEXT,
    plain_head TEXT,
    mac TEXT
)"""
_IDEMPOTENCY_V2 = """
CREATE TABLE idempotency (
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    key TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (session, tool, key)
)"""
_APPROVAL_COLUMNS_V2 = (
    ("session_kind", "TEXT NOT NULL DEFAULT 'main'"),
    ("scope", "TEXT"),
    ("detail", "TEXT NOT NULL DEFAULT '{}'"),
    ("waiter", "TEXT"),
    ("binding", "TEXT"),
    ("consumed_at", "REAL"),
)


def _migrate_v2(conn: sqlite3.Connection) -> None:
    # Where the keyed (HMAC) chain begins: created pending (NULLs) in this transaction; the audit
    # log fills it in under its key (store/chain.py). A database of this version without the row
    # has had its marker removed.
    conn.execute(_AUDIT_CHAIN_V2)
    conn.execute("INSERT OR IGNORE INTO audit_chain (one) VALUES (1)")
    conn.execute("DROP TABLE IF EXISTS idempotency")
    conn.execute(_IDEMPOTENCY_V2)
    conn.execute("CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at)")
    _add_approval_columns(conn, _APPROVAL_COLUMNS_V2)
    conn.execute("CREATE INDEX IF NOT EXISTS approvals_binding ON approvals (binding)")


def _add_approval_columns(conn: sqlite3.Connection, columns: tuple[tuple[str, str], ...]) -> None:
    """Column by column, so a database that already has some (put back to an older version by
    hand) still opens."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(approvals)")}
    for name, declaration in columns:
        if name not in present:
            conn.execute(f"ALTER TABLE approvals ADD COLUMN {name} {declaration}")


# v3 (the agent loop): audit records name the run they belong to; runs and their transcripts.
# A run's row changes as it goes (status, usage); its messages are appended, one row each, so a
# long run never rewrites its transcript.
_RUNS_V3 = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    ended_at REAL,
    skill TEXT,
    params TEXT NOT NULL,
    message TEXT,
    trigger TEXT NOT NULL,
    session TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    stop TEXT,
    error TEXT,
    usage TEXT NOT NULL,
    cost_usd REAL,
    owner TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
CREATE TABLE IF NOT EXISTS run_messages (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    audit_id INTEGER,
    PRIMARY KEY (run_id, seq)
);
"""


# v4 (triggers): scheduled jobs and their state, every firing of every trigger (also the
# persisted queue of runs not yet handed to the agent loop), webhook deliveries by id (replay
# protection and the original answer), and the lease that lets one process run the scheduler.
_TRIGGERS_V4 = """
CREATE TABLE IF NOT EXISTS trigger_jobs (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    spec TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_run REAL,
    retry_at REAL,
    attempt INTEGER NOT NULL DEFAULT 0,
    last_run REAL,
    last_status TEXT,
    last_error TEXT,
    last_run_id TEXT,
    run_requested REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS trigger_firings (
    id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    fired_by TEXT NOT NULL,
    skill TEXT,
    session TEXT NOT NULL,
    params TEXT NOT NULL,
    payload TEXT,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    request TEXT,
    owner TEXT,
    audit_id INTEGER,
    job TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    ended_at REAL
);
-- Only the firings still on their way (queued, being started, running) are looked up by state.
CREATE INDEX IF NOT EXISTS trigger_firings_open ON trigger_firings (status, ts)
    WHERE status IN ('queued', 'starting', 'started');
CREATE INDEX IF NOT EXISTS trigger_firings_by_name ON trigger_firings (kind, name, ts);
CREATE TABLE IF NOT EXISTS trigger_deliveries (
    hook TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    received_at REAL NOT NULL,
    event TEXT,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (hook, delivery_id)
);
CREATE INDEX IF NOT EXISTS trigger_deliveries_received ON trigger_deliveries (received_at);
CREATE TABLE IF NOT EXISTS trigger_lease (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    owner TEXT NOT NULL,
    heartbeat REAL NOT NULL
);
"""


def _migrate_v3(conn: sqlite3.Connection) -> None:
    present = {row[1] for row in conn.execute("PRAGMA table_info(audit)")}
    if "run_id" not in present:
        conn.execute("ALTER TABLE audit ADD COLUMN run_id TEXT")
    for statement in _split_script(_RUNS_V3):
        conn.execute(statement)


def _migrate_v4(conn: sqlite3.Connection) -> None:
    for statement in _split_script(_TRIGGERS_V4):
        conn.execute(statement)


def _migrate_v5(conn: sqlite3.Connection) -> None:
    # The head's MAC under the audit key, and the marker's flag that the head is keyed: both
    # filled in by the audit log under its key (store/audit.py) the first time it opens this.
    if "mac" not in {row[1] for row in conn.execute("PRAGMA table_info(audit_head)")}:
        conn.execute("ALTER TABLE audit_head ADD COLUMN mac TEXT")
    marker_columns = {row[1] for row in conn.execute("PRAGMA table_info(audit_chain)")}
    if marker_columns and "head_keyed" not in marker_columns:  # no table: its marker was removed
        conn.execute("ALTER TABLE audit_chain ADD COLUMN head_keyed INTEGER NOT NULL DEFAULT 0")


# v6: an approval names the agent run whose call asked and, for a tainted run, what tainted it
# (the person answering sees which output may be steering the model). Added last, so ``SELECT *``
# reads them after the older columns.
_APPROVAL_COLUMNS_V6 = (("run_id", "TEXT"), ("tainted_by", "TEXT"))


def _migrate_v6(conn: sqlite3.Connection) -> None:
    _add_approval_columns(conn, _APPROVAL_COLUMNS_V6)


# v7: dashboard sign-ins (store/sign_ins.py), so every gateway on this home knows them and a
# restart keeps them.
_SIGN_INS_V7 = """
CREATE TABLE IF NOT EXISTS ui_sign_ins (
    key TEXT PRIMARY KEY,
    token_digest TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_sign_ins_used ON ui_sign_ins (last_used)
"""


def _migrate_v7(conn: sqlite3.Connection) -> None:
    for statement in _split_script(_SIGN_INS_V7):
        conn.execute(statement)


# v8: the chain's own random id, under the marker's MAC and named by the log's anchor outside the
# database (store/anchor.py), so a log wiped and keyed afresh is another chain. Filled in by the
# audit log under its key the first time it opens this.
def _migrate_v8(conn: sqlite3.Connection) -> None:
    marker_columns = {row[1] for row in conn.execute("PRAGMA table_info(audit_chain)")}
    if marker_columns and "chain_id" not in marker_columns:  # no table: its marker was removed
        conn.execute("ALTER TABLE audit_chain ADD COLUMN chain_id TEXT")


# v9: an approval names the caller of the call that asked (cli, rest, mcp, agent, ...), and
# whether the record of that call was written because it never ran (cancelled, timed out, its
# process gone): whoever sets the flag writes that record, in the same transaction, so it is
# written once however many processes find the caller gone (store/approvals.py).
_APPROVAL_COLUMNS_V9 = (("caller", "TEXT"), ("gone_recorded", "INTEGER NOT NULL DEFAULT 0"))


def _migrate_v9(conn: sqlite3.Connection) -> None:
    _add_approval_columns(conn, _APPROVAL_COLUMNS_V9)


def _migrate_v1(conn: sqlite3.Connection) -> None:
    for statement in _split_script(_SCHEMA_V1):
        conn.execute(statement)


def _split_script(script: str) -> list[str]:
    """Statements of a script, a trigger's body kept whole (sqlite3.complete_statement)."""
    statements, pending = [], ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return [s for s in statements if s]


# Each step takes the schema from its index to the next version, in one transaction.
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_v1,
    _migrate_v2,
    _migrate_v3,
    _migrate_v4,
    _migrate_v5,
    _migrate_v6,
    _migrate_v7,
    _migrate_v8,
    _migrate_v9,
)
_SCHEMA_VERSION = len(_MIGRATIONS)


def _create_private(path: Path) -> None:
    """Create the file 0600 before SQLite does (it would use the umask, often 0644): the audit
    log, approvals and idempotent results are nobody else's to read. SQLite gives its -wal and
    -shm files the database file's mode."""
    # O_NOFOLLOW: a symlink planted at the database's name is refused, not followed.
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc.strerror}",
            hint="PINCER_HOME must hold pincer.db itself (not a symlink) in a directory you can write",
        ) from None


def open_database(home: Path, *, synchronous: str | None = None) -> sqlite3.Connection:
    """Open (and create or migrate) the database. ``synchronous`` NORMAL makes a commit durable
    against a crash of pincer; FULL also against power loss, at an fsync per commit. None: the
    config model's default for ``[audit] synchronous``."""
    if synchronous is None:
        from pincer.config import AuditSettings

        synchronous = AuditSettings().synchronous.upper()
    path = home / DB_FILENAME
    try:
        home.mkdir(parents=True, exist_ok=True)
        _create_private(path)
        with open_lock(path):  # the switch to WAL and the migrations, one process at a time
            return _set_up(path, synchronous)
    except OSError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc.strerror or exc}",
            hint="PINCER_HOME must be a directory you can write",
        ) from None


def _set_up(path: Path, synchronous: str) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc}",
            hint="check that the file is a pincer database and the directory is writable",
        ) from exc
    try:
        return _migrated(conn, path, synchronous)
    except BaseException:
        conn.close()
        raise


def _migrated(conn: sqlite3.Connection, path: Path, synchronous: str) -> sqlite3.Connection:
    try:
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
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Read again under the write lock: a pincer that does not take the open lock (an
                # older one) may have migrated since; a step is never run twice.
                if conn.execute("PRAGMA user_version").fetchone()[0] >= target:
                    conn.execute("COMMIT")
                    continue
                _MIGRATIONS[target - 1](conn)
                conn.execute(f"PRAGMA user_version={target}")
                conn.execute("COMMIT")
            except BaseException:
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
