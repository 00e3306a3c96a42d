"""Index-served reads of the answered approvals and of a person's audit records (issue 35: a
gateway that never stalls; issue 41: the audit filtered by person).

``approvals.closed_at``: when a request stopped waiting (answered, expired, its caller gone),
NULL while it waits. The dashboard's answered list is ordered by it, newest first, and a stored
column (rather than an index on ``COALESCE(answered_at, expires_at)``, which both databases could
index) is what SQLAlchemy reflects alike on both and what a keyset cursor can name. Rows already
closed take ``COALESCE(answered_at, expires_at)``: the order they were listed in before.
Indexes ``(closed_at, id)``, ``(session, closed_at, id)`` (a non-main session's list) and
``(status, closed_at, id)`` (a status filter; it replaces ``approvals_status``, a prefix of it)
serve that read without sorting the table; ``audit (person, id)`` and ``audit (approval_id)``, both
partial (most records name neither), serve the records of a person, newest first.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Rows closed before this revision: the time they were listed by until now.
BACKFILL = (
    "UPDATE approvals SET closed_at = COALESCE(answered_at, expires_at) WHERE status != 'pending' AND closed_at IS NULL"
)
_REAL: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")  # as schema.py's REAL


def _indexes(table: str) -> set[str]:
    return {str(index["name"]) for index in sa.inspect(op.get_bind()).get_indexes(table)}


def upgrade() -> None:
    # A database put back to an older revision by hand keeps the column and indexes it has.
    if "closed_at" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("approvals")}:
        op.add_column("approvals", sa.Column("closed_at", _REAL))
    op.execute(BACKFILL)
    present = _indexes("approvals")
    # ``approvals_status`` (status) becomes (status, closed_at, id): the same prefix for the reads
    # of pending requests, and the answered list filtered by status without a sort.
    if "approvals_status_closed" not in present:
        op.create_index("approvals_status_closed", "approvals", ["status", "closed_at", "id"])
    if "approvals_status" in present:
        op.drop_index("approvals_status", "approvals")
    if "approvals_closed" not in present:
        op.create_index("approvals_closed", "approvals", ["closed_at", "id"])
    if "approvals_session_closed" not in present:
        op.create_index("approvals_session_closed", "approvals", ["session", "closed_at", "id"])
    present = _indexes("audit")
    if "audit_person" not in present:
        op.create_index("audit_person", "audit", ["person", "id"], sqlite_where=sa.text("person IS NOT NULL"),
                        postgresql_where=sa.text("person IS NOT NULL"))  # fmt: skip
    if "audit_approval" not in present:
        op.create_index("audit_approval", "audit", ["approval_id"], sqlite_where=sa.text("approval_id IS NOT NULL"),
                        postgresql_where=sa.text("approval_id IS NOT NULL"))  # fmt: skip


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
