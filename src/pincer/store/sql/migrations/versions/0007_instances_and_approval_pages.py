"""What each process on a shared store is (issue 35: `pincer doctor` tells the truth).

``pincer_instances`` gains ``kind`` ('gateway' for a ``pincer serve``, 'command' for any other
pincer process that opened the store), ``home`` (the PINCER_HOME path on its host) and ``url``
(where a gateway listens). Rows already there keep NULLs: a pincer from before, of unknown kind. ``approvals`` gains an
index on ``(created_at, id)``: ``GET /api/v1/approvals`` reads a page by it, not the table.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_COLUMNS = ("kind", "home", "url")


def upgrade() -> None:
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("pincer_instances")}
    for name in _COLUMNS:
        if name not in present:  # put back to an older revision by hand and opened again
            op.add_column("pincer_instances", sa.Column(name, sa.Text))
    if "approvals_created" not in {index["name"] for index in sa.inspect(op.get_bind()).get_indexes("approvals")}:
        op.create_index("approvals_created", "approvals", ["created_at", "id"])


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
