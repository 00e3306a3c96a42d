"""Baseline: the schema pincers made before the store had one migration history.

That is SQLite and PostgreSQL at the last version of their old ladders (``user_version``,
``pincer_schema``: store/sql/legacy.py), two schemas that differed. Upgrading a database to this revision runs whatever of its old ladder it lacks
(store/sql/legacy.py), so a database an older pincer wrote, at any of its versions, arrives
here; the next revision makes the two one schema.

Revision ID: 0001
"""

from __future__ import annotations

from alembic import op

from pincer.store.sql import legacy

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        legacy.bring_sqlite(bind.connection.driver_connection)  # type: ignore[arg-type]
        return

    def execute(statement: str) -> list[tuple[object, ...]]:
        result = bind.exec_driver_sql(statement)
        return [tuple(row) for row in result] if result.returns_rows else []

    legacy.bring_postgres(execute)


def downgrade() -> None:
    raise NotImplementedError("the baseline has nothing below it")
