"""A personal access token's roles, and the person a run or a task acts for (issue 41: teams).

``person_tokens.roles``: the roles a token was scoped to (JSON, as written), NULL for one that
carries its person's roles (every token made before). ``runs.person`` and ``tasks.person``: the
person who started the run or made the call a task carries on (REST, the dashboard or MCP with
their token), NULL for those no person started.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _has_column(table: str, column: str) -> bool:
    return column in {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    # A database put back to an older revision by hand keeps the columns it has.
    if not _has_column("person_tokens", "roles"):
        op.add_column("person_tokens", sa.Column("roles", sa.Text))
    for table in ("runs", "tasks"):
        if not _has_column(table, "person"):
            op.add_column(table, sa.Column("person", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
