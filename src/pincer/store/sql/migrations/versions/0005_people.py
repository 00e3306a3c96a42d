"""People and their personal access tokens, and an audit that says who (issue 41: teams).

Two new tables, the same on both databases: ``people`` (a name, an email, the roles as written,
a status) and ``person_tokens`` (a token's sha256, never the token; its session, expiry, last use
and revocation), and ``oidc_logins`` (single sign-on logins begun, by the sha256 of their
state). The audit log gains ``person`` and ``approved_by``, empty in the records already
written (their chain values never covered them, so they still verify).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Copied, so a later change to schema.py never changes what this revision did.
_REAL: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")


def upgrade() -> None:
    if "people" in sa.inspect(op.get_bind()).get_table_names():
        return  # put back to an older revision by hand and opened again
    op.create_table(
        "people",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("email", sa.Text),
        sa.Column("roles", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'active'")),
        sa.Column("created_at", _REAL, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
    )
    op.create_table(
        "person_tokens",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("person", sa.Text, nullable=False),
        sa.Column("digest", sa.Text, nullable=False, unique=True),
        sa.Column("session", sa.Text),
        sa.Column("created_at", _REAL, nullable=False),
        sa.Column("expires_at", _REAL),
        sa.Column("last_used", _REAL),
        sa.Column("revoked_at", _REAL),
    )
    op.create_index("person_tokens_person", "person_tokens", ["person"])
    op.create_table(
        "oidc_logins",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("nonce", sa.Text, nullable=False),
        sa.Column("verifier", sa.Text, nullable=False),
        sa.Column("next_path", sa.Text, nullable=False),
        sa.Column("created_at", _REAL, nullable=False),
    )
    op.add_column("audit", sa.Column("person", sa.Text))
    op.add_column("audit", sa.Column("approved_by", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
