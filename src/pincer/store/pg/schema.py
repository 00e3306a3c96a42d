"""The PostgreSQL schema: numbered migrations, a version table, applied by ``pincer db upgrade``.

A gateway never migrates on its own (several start at once, and a migration is an operator's
decision): it checks the version at start and refuses an older schema with a hint naming
``pincer db upgrade``. The upgrade holds an advisory lock, so two run at once apply each step
once; each step is one transaction, so a failed step leaves the one before intact.

Columns keep the SQLite types' Python values (REAL -> double precision, INTEGER flags stay
integers): the audit chain hashes what it reads back, so both backends read back the same values.
"""

from __future__ import annotations

import logging
from typing import Any

from pincer.core.errors import SchemaBehind, StoreError

logger = logging.getLogger(__name__)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "schema_version", "upgrade", "check_schema"]

# Any fixed number: the lock `pincer db upgrade` holds while it migrates.
_UPGRADE_LOCK = 0x70696E63  # "pinc"

_V1 = """
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
_V2 = """
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
_V3 = """
ALTER TABLE approvals ADD COLUMN run_id TEXT;
ALTER TABLE approvals ADD COLUMN tainted_by TEXT
"""

# v4: dashboard sign-ins (store/sign_ins.py): a sign-in on one gateway holds on every other.
_V4 = """
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
_V5_INSTANCES = """
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
_V6_HOME_FILES = """
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
_V7_CHAIN_ID = """
ALTER TABLE audit_chain ADD COLUMN chain_id TEXT
"""

# v8: an approval names its call's caller, and whether the record of a call that never ran was
# written (store/approvals.py); added last, as on SQLite.
_V8_APPROVAL_CALLER = """
ALTER TABLE approvals ADD COLUMN caller TEXT;
ALTER TABLE approvals ADD COLUMN gone_recorded INTEGER NOT NULL DEFAULT 0
"""

# Each step takes the schema from its index to the next version.
MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5_INSTANCES, _V6_HOME_FILES, _V7_CHAIN_ID, _V8_APPROVAL_CALLER)
SCHEMA_VERSION = len(MIGRATIONS)

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS pincer_schema (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


def schema_version(conn: Any) -> int:
    """The version the database is at (0: never upgraded)."""
    exists = conn.execute("SELECT to_regclass('pincer_schema') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM pincer_schema").fetchone()
    return int(row[0])


def upgrade(conn: Any) -> tuple[int, int]:
    """Apply every missing step (``conn``: a sync psycopg connection in autocommit); returns
    (version before, version after)."""
    conn.execute("SELECT pg_advisory_lock(%s)", (_UPGRADE_LOCK,))
    try:
        conn.execute(_VERSION_TABLE)
        before = schema_version(conn)
        _refuse_newer(before)
        for target in range(before + 1, SCHEMA_VERSION + 1):
            with conn.transaction():
                for statement in _statements(MIGRATIONS[target - 1]):
                    conn.execute(statement)
                conn.execute("INSERT INTO pincer_schema (version) VALUES (%s)", (target,))
            logger.info("PostgreSQL store upgraded to schema %d", target)
        return before, SCHEMA_VERSION
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_UPGRADE_LOCK,))


def check_schema(conn: Any, shown_url: str) -> None:
    """Refuse (StoreError) a database whose schema is not the one this pincer writes."""
    version = schema_version(conn)
    _refuse_newer(version)
    if version < SCHEMA_VERSION:
        state = "has no pincer schema yet" if version == 0 else f"is at schema {version}"
        raise SchemaBehind(
            f"the PostgreSQL store {shown_url} {state}; this pincer needs schema {SCHEMA_VERSION}",
            hint="run `pincer db upgrade` once (with the same [store] url), then start the gateways",
        )


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the PostgreSQL store was upgraded by a newer pincer (schema {version}, this one knows {SCHEMA_VERSION})",
            hint="upgrade pincer on this machine, or point [store] url elsewhere",
        )


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";\n") if part.strip()]
