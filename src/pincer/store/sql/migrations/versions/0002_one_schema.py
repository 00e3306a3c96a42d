"""One schema for both databases: what each lacked of the other's.

SQLite gains what only PostgreSQL had: the grants' version counter, idempotency claims (a
claimed key has no result yet, so ``result`` may be NULL), the instances table, the shared
registry files, the index of records that name a grant, and the sign-ins' index the old ladder
meant to make and did not; it loses the trigger that moved the audit head with each record (the
audit log moves it itself now, as it always did on PostgreSQL). PostgreSQL gains nothing but the
guard version. Both then hold a version an older pincer refuses (one past its old ladder's last:
store/sql/schema.py's ``LEGACY_GUARD_VERSION``), so it never writes into a schema it does not know.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pincer.store.sql.schema import LEGACY_GUARD_VERSION

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The shape of the three tables SQLite lacked, as this revision made them (copied, so a later
# change to schema.py never changes what this revision did).
_REAL: sa.types.TypeEngine[float] = sa.REAL()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(
            f"INSERT INTO pincer_schema (version) VALUES ({LEGACY_GUARD_VERSION['postgresql']}) ON CONFLICT DO NOTHING"
        )
        return
    # Each part only where it is missing: a database that has some of it already (put back to an
    # older version by hand, then opened again) still arrives.
    present = sa.inspect(bind)
    tables = set(present.get_table_names())
    if "grants_version" not in tables:
        op.create_table(
            "grants_version",
            sa.Column("one", sa.Integer, sa.CheckConstraint("one = 1"), primary_key=True),
            sa.Column("version", sa.Integer, nullable=False),
        )
        op.execute("INSERT INTO grants_version (one, version) VALUES (1, 0)")
    claims = {c["name"] for c in present.get_columns("idempotency")}
    if not {"claimed_by", "claim_until"} <= claims:
        with op.batch_alter_table("idempotency") as batch:
            batch.alter_column("result", existing_type=sa.Text, nullable=True)
            batch.add_column(sa.Column("claimed_by", sa.Text))
            batch.add_column(sa.Column("claim_until", _REAL))
    if "pincer_instances" not in tables:
        op.create_table(
            "pincer_instances",
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("tag", sa.Text, nullable=False),
            sa.Column("host", sa.Text, nullable=False),
            sa.Column("pid", sa.Integer, nullable=False),
            sa.Column("started_at", _REAL, nullable=False),
            sa.Column("heartbeat_at", _REAL, nullable=False),
            sa.Column("stopped_at", _REAL),
        )
        op.create_index("pincer_instances_tag", "pincer_instances", ["tag"])
    if "home_files" not in tables:
        op.create_table(
            "home_files",
            sa.Column("path", sa.Text, primary_key=True),
            sa.Column("kind", sa.Text, sa.CheckConstraint("kind IN ('file', 'link', 'gone')"), nullable=False),
            sa.Column("data", sa.LargeBinary, nullable=False),
            sa.Column("sha256", sa.Text, nullable=False),
            sa.Column("mode", sa.Integer, nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("written_by", sa.Text, nullable=False),
            sa.Column("written_at", _REAL, nullable=False),
        )
        op.create_index("home_files_by_version", "home_files", ["version"])
    if "home_files_version" not in tables:
        op.create_table(
            "home_files_version",
            sa.Column("one", sa.Integer, sa.CheckConstraint("one = 1"), primary_key=True),
            sa.Column("version", sa.Integer, nullable=False),
        )
        op.execute("INSERT INTO home_files_version (one, version) VALUES (1, 0)")
    op.create_index("audit_grant", "audit", ["grant_id"], sqlite_where=sa.text("grant_id IS NOT NULL"), if_not_exists=True)
    # The audit log moves its head itself, on both databases, in the transaction of its records.
    op.execute("DROP TRIGGER IF EXISTS audit_head_advance")
    # The old ladder's last step left its index out (its script's last statement had no ";").
    op.create_index("ui_sign_ins_used", "ui_sign_ins", ["last_used"], if_not_exists=True)
    op.execute(f"PRAGMA user_version = {LEGACY_GUARD_VERSION['sqlite']}")


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
