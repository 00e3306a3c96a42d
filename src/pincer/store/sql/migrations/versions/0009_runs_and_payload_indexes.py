"""Index-served runs pages, filtered or not, and retention in batches (issue 35: a gateway that
never stalls; retention).

``runs_created`` was ``(created_at)``: runs created at the same instant were sorted by id as they
were read. It becomes ``(created_at, id)``, the list's whole key, and ``(session | status | skill,
created_at, id)`` serve a page filtered by one of those (the status and skill filters were a window
of 5,000 runs filtered in Python; a session's page walked ``runs_created`` past other sessions'
runs). ``runs_ended (ended_at, id)`` and ``trigger_firings_payload (ts, id)``, partial on the
payloads retention may clear, let retention delete finished runs and clear delivered payloads a
batch at a time, oldest first. A finished run written without ``ended_at`` takes ``updated_at``:
the age retention read it by until now (``COALESCE(ended_at, updated_at)``).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BACKFILL = "UPDATE runs SET ended_at = updated_at WHERE status != 'running' AND ended_at IS NULL"
# As schema.py's trigger_firings_payload (the tests compare the two).
HELD_PAYLOADS = "payload IS NOT NULL AND kind = 'hook' AND status NOT IN ('queued', 'starting', 'started')"
_RUNS = {
    "runs_session_created": ["session", "created_at", "id"],
    "runs_status_created": ["status", "created_at", "id"],
    "runs_skill_created": ["skill", "created_at", "id"],
    "runs_ended": ["ended_at", "id"],
}


def _indexes(table: str) -> dict[str, list[str]]:
    return {str(i["name"]): [str(c) for c in i["column_names"]] for i in sa.inspect(op.get_bind()).get_indexes(table)}


def upgrade() -> None:
    op.execute(BACKFILL)
    # A database put back to an older revision by hand keeps the indexes it has.
    present = _indexes("runs")
    if present.get("runs_created") != ["created_at", "id"]:
        if "runs_created" in present:  # (created_at) alone, from 0008 and before
            op.drop_index("runs_created", "runs")
        op.create_index("runs_created", "runs", ["created_at", "id"])
    for name, columns in _RUNS.items():
        if name not in present:
            op.create_index(name, "runs", columns)
    if "trigger_firings_payload" not in _indexes("trigger_firings"):
        op.create_index("trigger_firings_payload", "trigger_firings", ["ts", "id"],
                        sqlite_where=sa.text(HELD_PAYLOADS), postgresql_where=sa.text(HELD_PAYLOADS))  # fmt: skip


def downgrade() -> None:
    raise NotImplementedError("pincer migrates forward only; restore a backup to go back")
