"""The audit log's signed marks: where the last verify ended, where the archived records end.

``audit_marks`` (store/sql/schema.py): one row per mark, each with an HMAC under the audit key.
A verify walks on from the ``verified`` mark; records archived into segments (``pincer audit
archive``) leave the database only with an ``archived`` mark saying where the chain in it
continues from.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    real: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")
    ident: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    if "audit_marks" in sa.inspect(op.get_bind()).get_table_names():
        return  # put back to an older revision by hand and opened again
    op.create_table(
        "audit_marks",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("last_id", ident, nullable=False),
        sa.Column("last_hash", sa.Text, nullable=False),
        sa.Column("made_at", real, nullable=False),
        sa.Column("mac", sa.Text, nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
