"""MCP Tasks: the ``tasks`` table (store/tasks.py), on both databases.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The shape as this revision made it (copied, so a later change to schema.py never changes it).
    real: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")
    big: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    if "tasks" in sa.inspect(op.get_bind()).get_table_names():
        return  # put back to an older revision by hand and opened again
    op.create_table(
        "tasks",
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
        sa.Column("owner", sa.Text),
        sa.Column("cancel_requested", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", real, nullable=False),
        sa.Column("updated_at", real, nullable=False),
        sa.Column("expires_at", real, nullable=False),
        sa.Column("ttl_ms", big, nullable=False),
        sa.Column("poll_ms", sa.Integer, nullable=False),
    )
    op.create_index("tasks_session", "tasks", ["session", "status"])
    op.create_index("tasks_status", "tasks", ["status"])
    op.create_index("tasks_expiry", "tasks", ["expires_at"])


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
