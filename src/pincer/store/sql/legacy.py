"""The schema as pincers before Alembic made it: their migrations, step by step, unchanged.

Until the store moved to one schema and one migration history (store/sql/schema.py, Alembic in
store/sql/migrations/), SQLite and PostgreSQL each had a ladder of their own: SQLite's versioned
by ``PRAGMA user_version`` (1 to 9), PostgreSQL's by the ``pincer_schema`` table (1 to 8). The
baseline revision (``0001``) is where those ladders ended; a database a pincer of that time
wrote, at any step of its ladder, is brought to the ladder's end here and then migrated forward
(store/sql/migrate.py). This is history: nothing here changes again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

__all__ = ["SQLITE_LAST", "POSTGRES_LAST", "bring_sqlite", "bring_postgres", "sqlite_version", "postgres_version"]

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


def _sqlite_v2(conn: sqlite3.Connection) -> None:
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


def _sqlite_v3(conn: sqlite3.Connection) -> None:
    present = {row[1] for row in conn.execute("PRAGMA table_info(audit)")}
    if "run_id" not in present:
        conn.execute("ALTER TABLE audit ADD COLUMN run_id TEXT")
    for statement in _split_script(_RUNS_V3):
        conn.execute(statement)


def _sqlite_v4(conn: sqlite3.Connection) -> None:
    for statement in _split_script(_TRIGGERS_V4):
        conn.execute(statement)


def _sqlite_v5(conn: sqlite3.Connection) -> None:
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


def _sqlite_v6(conn: sqlite3.Connection) -> None:
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


def _sqlite_v7(conn: sqlite3.Connection) -> None:
    for statement in _split_script(_SIGN_INS_V7):
        conn.execute(statement)


# v8: the chain's own random id, under the marker's MAC and named by the log's anchor outside the
# database (store/anchor.py), so a log wiped and keyed afresh is another chain. Filled in by the
# audit log under its key the first time it opens this.
def _sqlite_v8(conn: sqlite3.Connection) -> None:
    marker_columns = {row[1] for row in conn.execute("PRAGMA table_info(audit_chain)")}
    if marker_columns and "chain_id" not in marker_columns:  # no table: its marker was removed
        conn.execute("ALTER TABLE audit_chain ADD COLUMN chain_id TEXT")


# v9: an approval names the caller of the call that asked (cli, rest, mcp, agent, ...), and
# whether the record of that call was written because it never ran (cancelled, timed out, its
# process gone): whoever sets the flag writes that record, in the same transaction, so it is
# written once however many processes find the caller gone (store/approvals.py).
_APPROVAL_COLUMNS_V9 = (("caller", "TEXT"), ("gone_recorded", "INTEGER NOT NULL DEFAULT 0"))


def _sqlite_v9(conn: sqlite3.Connection) -> None:
    _add_approval_columns(conn, _APPROVAL_COLUMNS_V9)


def _sqlite_v1(conn: sqlite3.Connection) -> None:
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
_SQLITE_STEPS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _sqlite_v1,
    _sqlite_v2,
    _sqlite_v3,
    _sqlite_v4,
    _sqlite_v5,
    _sqlite_v6,
    _sqlite_v7,
    _sqlite_v8,
    _sqlite_v9,
)
SQLITE_LAST = len(_SQLITE_STEPS)


def sqlite_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def bring_sqlite(conn: sqlite3.Connection) -> tuple[int, int]:
    """Run the steps a SQLite database lacks, inside the caller's transaction; (before, after)."""
    before = sqlite_version(conn)
    for target in range(before + 1, SQLITE_LAST + 1):
        _SQLITE_STEPS[target - 1](conn)
        conn.execute(f"PRAGMA user_version={target}")
    return before, max(before, SQLITE_LAST)


_PG_V1 = """
CREATE TABLE audit (
    id BIGINT PRIMARY KEY,
    ts DOUBLE PRECISION NOT NULL,
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
    duration_ms DOUBLE PRECISION NOT NULL,
    usage TEXT NOT NULL,
    idempotency_key TEXT,
    cached INTEGER NOT NULL,
    approval_id TEXT,
    run_id TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_tool_ts ON audit (tool, ts);
CREATE INDEX audit_grant ON audit (grant_id) WHERE grant_id IS NOT NULL;
CREATE TABLE audit_head (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    last_id BIGINT NOT NULL,
    last_hash TEXT NOT NULL,
    mac TEXT
);
INSERT INTO audit_head (one, last_id, last_hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TABLE audit_chain (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    keyed_from BIGINT,
    key_id TEXT,
    plain_head TEXT,
    mac TEXT,
    head_keyed INTEGER NOT NULL DEFAULT 0
);
INSERT INTO audit_chain (one) VALUES (1);
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    effects TEXT NOT NULL,
    hosts TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    answered_at DOUBLE PRECISION,
    answered_by TEXT,
    session_kind TEXT NOT NULL DEFAULT 'main',
    scope TEXT,
    detail TEXT NOT NULL DEFAULT '{}',
    waiter TEXT,
    binding TEXT,
    consumed_at DOUBLE PRECISION
);
CREATE INDEX approvals_status ON approvals (status);
CREATE INDEX approvals_binding ON approvals (binding);
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE grants_version (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    version BIGINT NOT NULL
);
INSERT INTO grants_version (one, version) VALUES (1, 0);
CREATE TABLE idempotency (
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    key TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT,
    expires_at DOUBLE PRECISION NOT NULL,
    claimed_by TEXT,
    claim_until DOUBLE PRECISION,
    PRIMARY KEY (session, tool, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
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
    cost_usd DOUBLE PRECISION,
    owner TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_created ON runs (created_at);
CREATE TABLE run_messages (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    audit_id BIGINT,
    PRIMARY KEY (run_id, seq)
)
"""

# v2: triggers (store/triggers.py's tables: jobs, firings, deliveries, the leader's lease row).
_PG_V2 = """
CREATE TABLE trigger_jobs (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    spec TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_run DOUBLE PRECISION,
    retry_at DOUBLE PRECISION,
    attempt INTEGER NOT NULL DEFAULT 0,
    last_run DOUBLE PRECISION,
    last_status TEXT,
    last_error TEXT,
    last_run_id TEXT,
    run_requested DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE trigger_firings (
    id TEXT PRIMARY KEY,
    ts DOUBLE PRECISION NOT NULL,
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
    audit_id BIGINT,
    job TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    ended_at DOUBLE PRECISION
);
CREATE INDEX trigger_firings_open ON trigger_firings (status, ts) WHERE status IN ('queued', 'starting', 'started');
CREATE INDEX trigger_firings_by_name ON trigger_firings (kind, name, ts);
CREATE TABLE trigger_deliveries (
    hook TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    event TEXT,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (hook, delivery_id)
);
CREATE INDEX trigger_deliveries_received ON trigger_deliveries (received_at);
CREATE TABLE trigger_lease (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    owner TEXT NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL
)
"""

# v3: an approval names the agent run whose call asked and, for a tainted run, what tainted it.
# Added last, as on SQLite, so ``SELECT *`` reads the same columns in the same order.
_PG_V3 = """
ALTER TABLE approvals ADD COLUMN run_id TEXT;
ALTER TABLE approvals ADD COLUMN tainted_by TEXT
"""

# v4: dashboard sign-ins (store/sign_ins.py): a sign-in on one gateway holds on every other.
_PG_V4 = """
CREATE TABLE ui_sign_ins (
    key TEXT PRIMARY KEY,
    token_digest TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    last_used DOUBLE PRECISION NOT NULL
);
CREATE INDEX ui_sign_ins_used ON ui_sign_ins (last_used)
"""

# v5: a row per process on the store, with a heartbeat (store/pg/instances.py): whether the owner
# of a claim, an approval wait, a run or the scheduler's leader lock on another machine still runs.
_PG_V5_INSTANCES = """
CREATE TABLE pincer_instances (
    id TEXT PRIMARY KEY,
    tag TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    stopped_at DOUBLE PRECISION
);
CREATE INDEX pincer_instances_tag ON pincer_instances (tag)
"""

# v6: the registry's files under PINCER_HOME, shared by the homes of several machines
# (store/home_share.py, store/pg/home_files.py), and their version counter.
_PG_V6_HOME_FILES = """
CREATE TABLE home_files (
    path TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('file', 'link', 'gone')),
    data BYTEA NOT NULL,
    sha256 TEXT NOT NULL,
    mode INTEGER NOT NULL,
    version BIGINT NOT NULL,
    written_by TEXT NOT NULL,
    written_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX home_files_by_version ON home_files (version);
CREATE TABLE home_files_version (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    version BIGINT NOT NULL
);
INSERT INTO home_files_version (one, version) VALUES (1, 0)
"""

# v7: the chain's own random id, under the marker's MAC and named by each home's anchor outside
# the database (store/anchor.py): a log wiped and keyed afresh is another chain.
_PG_V7_CHAIN_ID = """
ALTER TABLE audit_chain ADD COLUMN chain_id TEXT
"""

# v8: an approval names its call's caller, and whether the record of a call that never ran was
# written (store/approvals.py); added last, as on SQLite.
_PG_V8_APPROVAL_CALLER = """
ALTER TABLE approvals ADD COLUMN caller TEXT;
ALTER TABLE approvals ADD COLUMN gone_recorded INTEGER NOT NULL DEFAULT 0
"""

# Each step takes the schema from its index to the next version.
_PG_STEPS: tuple[str, ...] = (_PG_V1, _PG_V2, _PG_V3, _PG_V4, _PG_V5_INSTANCES, _PG_V6_HOME_FILES, _PG_V7_CHAIN_ID, _PG_V8_APPROVAL_CALLER)
POSTGRES_LAST = len(_PG_STEPS)
_PG_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS pincer_schema (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


def postgres_version(execute: Callable[[str], Any]) -> int:
    """``execute``: runs one statement, returns its rows."""
    if not execute("SELECT to_regclass('pincer_schema') IS NOT NULL")[0][0]:
        return 0
    return int(execute("SELECT COALESCE(MAX(version), 0) FROM pincer_schema")[0][0])


def bring_postgres(execute: Callable[[str], Any]) -> tuple[int, int]:
    """Run the steps a PostgreSQL database lacks, inside the caller's transaction; (before, after)."""
    execute(_PG_VERSION_TABLE)
    before = postgres_version(execute)
    for target in range(before + 1, POSTGRES_LAST + 1):
        for statement in (part.strip() for part in _PG_STEPS[target - 1].split(";\n")):
            if statement:
                execute(statement)
        execute(f"INSERT INTO pincer_schema (version) VALUES ({target})")
    return before, max(before, POSTGRES_LAST)
