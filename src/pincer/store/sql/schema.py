"""Every table of the store, once, for both databases (SQLAlchemy Core ``Table``s on one ``MetaData``).

A new database is made from these tables (store/sql/migrate.py), an existing one is brought to
them by the migrations (store/sql/migrations/); a test compares a migrated database with these
tables on both databases, column by column, so the two ways never drift apart.

Only portable types: integers, floats, text and bytes, so both databases hand back the same
Python values. That matters most for the audit log, whose chain hashes what it reads back: a
flag is an integer on both (never a boolean), a time a double, JSON is text. ``REAL`` is SQLite's
REAL and PostgreSQL's double precision; ``ID`` (record and version counters) SQLite's INTEGER
(the audit id stays the rowid) and PostgreSQL's bigint.

Rows a database must start with (the audit head at the genesis hash, the counters at 0) are in
:data:`SEED_ROWS`. ``pincer_schema`` is read only by pincers from before the migrations moved to
Alembic: it holds a version past the ones they know, so they refuse this database instead of
writing into a schema they do not know (PostgreSQL; on SQLite ``PRAGMA user_version`` does that).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from pincer.store.chain import GENESIS_HASH
from pincer.store.sql import legacy

__all__ = ["metadata", "SEED_ROWS", "LEGACY_GUARD_VERSION", "tables_for"]

# What an older pincer reads as "a newer pincer's schema": one past the last version of its old
# ladder (store/sql/legacy.py), SQLite's user_version and PostgreSQL's pincer_schema.
LEGACY_GUARD_VERSION = {"sqlite": legacy.SQLITE_LAST + 1, "postgresql": legacy.POSTGRES_LAST + 1}

REAL: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")
ID: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()


def _one_row(name: str, *columns: sa.Column[Any]) -> sa.Table:
    """A table of exactly one row (``one = 1``): a head, a counter, a marker, a lease."""
    return sa.Table(
        name, metadata, sa.Column("one", sa.Integer, sa.CheckConstraint("one = 1"), primary_key=True), *columns
    )


audit = sa.Table(
    "audit", metadata,
    sa.Column("id", ID, primary_key=True, autoincrement=False),
    sa.Column("ts", REAL, nullable=False),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("caller", sa.Text, nullable=False),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("grant_id", sa.Text),
    sa.Column("outcome", sa.Text, nullable=False),
    sa.Column("error_code", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("effects", sa.Text, nullable=False),
    sa.Column("duration_ms", REAL, nullable=False),
    sa.Column("usage", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("cached", sa.Integer, nullable=False),
    sa.Column("approval_id", sa.Text),
    sa.Column("prev_hash", sa.Text, nullable=False),
    sa.Column("hash", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("person", sa.Text),  # the person behind the call or act (store/audit.py)
    sa.Column("approved_by", sa.Text),  # who answered its approval
    # Few indexes: each is one more page written per commit, on the hot path. Counting a grant's
    # uses reads only the records that name a grant.
    sa.Index("audit_tool_ts", "tool", "ts"),
    sa.Index("audit_grant", "grant_id", sqlite_where=sa.text("grant_id IS NOT NULL"),
             postgresql_where=sa.text("grant_id IS NOT NULL")),
    # A person's records, newest first: those naming them, and the calls their answers let through
    # (revision 0008). Partial: most records name no person, and only asked calls an approval.
    sa.Index("audit_person", "person", "id", sqlite_where=sa.text("person IS NOT NULL"),
             postgresql_where=sa.text("person IS NOT NULL")),
    sa.Index("audit_approval", "approval_id", sqlite_where=sa.text("approval_id IS NOT NULL"),
             postgresql_where=sa.text("approval_id IS NOT NULL")),
)  # fmt: skip

audit_head = _one_row(
    "audit_head",
    sa.Column("last_id", ID, nullable=False),
    sa.Column("last_hash", sa.Text, nullable=False),
    sa.Column("mac", sa.Text),
)

audit_chain = _one_row(
    "audit_chain",
    sa.Column("keyed_from", ID),
    sa.Column("key_id", sa.Text),
    sa.Column("plain_head", sa.Text),
    sa.Column("mac", sa.Text),
    sa.Column("head_keyed", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("chain_id", sa.Text),
)

# Signed statements about the chain (store/audit.py): ``verified`` is where the last verify
# ended (a later one walks on from there), ``archived`` where the records that left the database
# for archive segments end (the chain in the database continues from it). Each carries an HMAC
# under the audit key, so nobody without the key can move one.
audit_marks = sa.Table(
    "audit_marks", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("last_id", ID, nullable=False),
    sa.Column("last_hash", sa.Text, nullable=False),
    sa.Column("made_at", REAL, nullable=False),
    sa.Column("mac", sa.Text, nullable=False),
)  # fmt: skip

approvals = sa.Table(
    "approvals", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("expires_at", REAL, nullable=False),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("effects", sa.Text, nullable=False),
    sa.Column("hosts", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("answered_at", REAL),
    sa.Column("answered_by", sa.Text),
    sa.Column("session_kind", sa.Text, nullable=False, server_default=sa.text("'main'")),
    sa.Column("scope", sa.Text),
    sa.Column("detail", sa.Text, nullable=False, server_default=sa.text("'{}'")),
    sa.Column("waiter", sa.Text),
    sa.Column("binding", sa.Text),
    sa.Column("consumed_at", REAL),
    sa.Column("run_id", sa.Text),
    sa.Column("tainted_by", sa.Text),
    sa.Column("caller", sa.Text),
    # Whether the record of the call that asked was written because it never ran (store/approvals.py).
    sa.Column("gone_recorded", sa.Integer, nullable=False, server_default=sa.text("0")),
    # When it stopped waiting (answered, expired, its caller gone); NULL while pending (revision 0008).
    sa.Column("closed_at", REAL),
    sa.Index("approvals_binding", "binding"),
    sa.Index("approvals_created", "created_at", "id"),  # the pages of GET /approvals (revision 0007)
    # The answered list, newest first, all of it or one session's (revision 0008).
    sa.Index("approvals_closed", "closed_at", "id"),
    sa.Index("approvals_session_closed", "session", "closed_at", "id"),
    sa.Index("approvals_status_closed", "status", "closed_at", "id"),  # and the pending ones, by its prefix
)  # fmt: skip

grants = sa.Table(
    "grants", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)  # fmt: skip

# Moves with every change of ``grants``, in the same transaction: a gateway reads it to know
# whether another one changed the grants.
grants_version = _one_row("grants_version", sa.Column("version", ID, nullable=False))

idempotency = sa.Table(
    "idempotency", metadata,
    sa.Column("session", sa.Text, primary_key=True),
    sa.Column("tool", sa.Text, primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("args_hash", sa.Text, nullable=False),
    sa.Column("result", sa.Text),  # NULL while the call that claimed the key runs
    sa.Column("expires_at", REAL, nullable=False),
    sa.Column("claimed_by", sa.Text),
    sa.Column("claim_until", REAL),
    sa.Index("idempotency_expiry", "expires_at"),
)  # fmt: skip

# MCP Tasks (store/tasks.py): a call handed back as a handle its session polls. The row is written
# before the handle leaves, so any gateway of the store answers for it.
tasks = sa.Table(
    "tasks", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("caller", sa.Text, nullable=False),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("status_message", sa.Text),
    sa.Column("approval_id", sa.Text),
    sa.Column("result", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("owner", sa.Text),  # the process running the call (store/owners.py), while it runs
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
    sa.Column("expires_at", REAL, nullable=False),
    sa.Column("ttl_ms", ID, nullable=False),
    sa.Column("poll_ms", sa.Integer, nullable=False),
    sa.Column("person", sa.Text),  # the person whose call it is (their token); NULL: no person
    sa.Index("tasks_session", "session", "status"),
    sa.Index("tasks_status", "status"),
    sa.Index("tasks_expiry", "expires_at"),
)  # fmt: skip

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
    sa.Column("ended_at", REAL),
    sa.Column("skill", sa.Text),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("message", sa.Text),
    sa.Column("trigger", sa.Text, nullable=False),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("provider", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("stop", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("usage", sa.Text, nullable=False),
    sa.Column("cost_usd", REAL),
    sa.Column("owner", sa.Text),
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("person", sa.Text),  # the person who started it (their token); NULL: no person
    # The list, newest first, by (created_at, id), whole or filtered by one column: each filter's
    # page is a range of its own index, read from the cursor with no sort (revision 0009).
    sa.Index("runs_created", "created_at", "id"),
    sa.Index("runs_session_created", "session", "created_at", "id"),
    sa.Index("runs_status_created", "status", "created_at", "id"),
    sa.Index("runs_skill_created", "skill", "created_at", "id"),
    # Retention: the finished runs, oldest ended first, a batch at a time (a running run has none).
    sa.Index("runs_ended", "ended_at", "id"),
)  # fmt: skip

run_messages = sa.Table(
    "run_messages", metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("ts", REAL, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("audit_id", ID),
)  # fmt: skip

trigger_jobs = sa.Table(
    "trigger_jobs", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("spec_hash", sa.Text, nullable=False),
    sa.Column("paused", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("next_run", REAL),
    sa.Column("retry_at", REAL),
    sa.Column("attempt", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("last_run", REAL),
    sa.Column("last_status", sa.Text),
    sa.Column("last_error", sa.Text),
    sa.Column("last_run_id", sa.Text),
    sa.Column("run_requested", REAL),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
)  # fmt: skip

_OPEN_FIRINGS = sa.text("status IN ('queued', 'starting', 'started')")
# The webhook payloads retention may clear: delivered (the firing no longer on its way), still held.
_HELD_PAYLOADS = "payload IS NOT NULL AND kind = 'hook' AND status NOT IN ('queued', 'starting', 'started')"
trigger_firings = sa.Table(
    "trigger_firings", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("ts", REAL, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("fired_by", sa.Text, nullable=False),
    sa.Column("skill", sa.Text),
    sa.Column("session", sa.Text, nullable=False),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("payload", sa.Text),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("request", sa.Text),
    sa.Column("owner", sa.Text),
    sa.Column("audit_id", ID),
    sa.Column("job", sa.Text),
    sa.Column("attempt", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("ended_at", REAL),
    # Only the firings still on their way (queued, being started, running) are looked up by state.
    sa.Index("trigger_firings_open", "status", "ts", sqlite_where=_OPEN_FIRINGS, postgresql_where=_OPEN_FIRINGS),
    sa.Index("trigger_firings_by_name", "kind", "name", "ts"),
    # Retention clears them oldest first, a batch at a time; a cleared one leaves the index.
    sa.Index("trigger_firings_payload", "ts", "id", sqlite_where=sa.text(_HELD_PAYLOADS),
             postgresql_where=sa.text(_HELD_PAYLOADS)),
)  # fmt: skip

trigger_deliveries = sa.Table(
    "trigger_deliveries", metadata,
    sa.Column("hook", sa.Text, primary_key=True),
    sa.Column("delivery_id", sa.Text, primary_key=True),
    sa.Column("received_at", REAL, nullable=False),
    sa.Column("event", sa.Text),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("response", sa.Text, nullable=False),
    sa.Index("trigger_deliveries_received", "received_at"),
)  # fmt: skip

trigger_lease = _one_row(
    "trigger_lease",
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("heartbeat", REAL, nullable=False),
)

ui_sign_ins = sa.Table(
    "ui_sign_ins", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("token_digest", sa.Text, nullable=False),
    sa.Column("csrf", sa.Text, nullable=False),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("last_used", REAL, nullable=False),
    sa.Index("ui_sign_ins_used", "last_used"),
)  # fmt: skip

# People and their personal access tokens (store/people.py): who answers, changes policy, calls.
people = sa.Table(
    "people", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("email", sa.Text),
    sa.Column("roles", sa.Text, nullable=False),  # JSON: the roles as written (policy/roles.py)
    sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'active'")),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("created_by", sa.Text, nullable=False),
)  # fmt: skip

# Only the token's sha256 is kept: a copy of the database signs nobody in.
person_tokens = sa.Table(
    "person_tokens", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("person", sa.Text, nullable=False),
    sa.Column("digest", sa.Text, nullable=False, unique=True),
    sa.Column("session", sa.Text),  # the gateway session its calls run under; NULL: [gateway] session
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("expires_at", REAL),
    sa.Column("last_used", REAL),
    sa.Column("revoked_at", REAL),
    sa.Column("roles", sa.Text),  # the roles it is scoped to (JSON, as written); NULL: its person's
    sa.Index("person_tokens_person", "person"),
)  # fmt: skip

# Single sign-on logins begun and not finished (store/oidc_logins.py): keyed by the state's sha256.
oidc_logins = sa.Table(
    "oidc_logins", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("provider", sa.Text, nullable=False),
    sa.Column("nonce", sa.Text, nullable=False),
    sa.Column("verifier", sa.Text, nullable=False),
    sa.Column("next_path", sa.Text, nullable=False),
    sa.Column("created_at", REAL, nullable=False),
)  # fmt: skip

# A row per process on a shared store, with a heartbeat (store/instances.py).
pincer_instances = sa.Table(
    "pincer_instances", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tag", sa.Text, nullable=False),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", REAL, nullable=False),
    sa.Column("heartbeat_at", REAL, nullable=False),
    sa.Column("stopped_at", REAL),
    # What the process is, so `pincer doctor` tells gateways from commands and this home's from
    # others' (revision 0007): 'gateway' or 'command' (NULL: a pincer from before), the home's
    # path on its host, and where a gateway listens.
    sa.Column("kind", sa.Text),
    sa.Column("home", sa.Text),
    sa.Column("url", sa.Text),
    sa.Index("pincer_instances_tag", "tag"),
)  # fmt: skip

# The registry's files shared by the homes of several machines (store/home_files.py).
home_files = sa.Table(
    "home_files", metadata,
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, sa.CheckConstraint("kind IN ('file', 'link', 'gone')"), nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("sha256", sa.Text, nullable=False),
    sa.Column("mode", sa.Integer, nullable=False),
    sa.Column("version", ID, nullable=False),
    sa.Column("written_by", sa.Text, nullable=False),
    sa.Column("written_at", REAL, nullable=False),
    sa.Index("home_files_by_version", "version"),
)  # fmt: skip

home_files_version = _one_row("home_files_version", sa.Column("version", ID, nullable=False))

pincer_schema = sa.Table(
    "pincer_schema", metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
    info={"dialects": ("postgresql",)},
)  # fmt: skip

SEED_ROWS: tuple[tuple[sa.Table, dict[str, object]], ...] = (
    (audit_head, {"one": 1, "last_id": 0, "last_hash": GENESIS_HASH}),
    (audit_chain, {"one": 1}),  # pending: the audit log keys it under its key when it first opens
    (grants_version, {"one": 1, "version": 0}),
    (home_files_version, {"one": 1, "version": 0}),
)


def tables_for(dialect: str) -> list[sa.Table]:
    """The tables a database of ``dialect`` holds."""
    return [t for t in metadata.sorted_tables if dialect in t.info.get("dialects", ("sqlite", "postgresql"))]
