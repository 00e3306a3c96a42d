"""Alembic's entry point: run the revisions on the connection store/sql/migrate.py hands over.

Each revision runs in a transaction of its own (SQLite's included: migrate.py's engine begins
``BEGIN IMMEDIATE`` itself, so its DDL is transactional too), so a failed step leaves the one
before it intact. SQLite changes a column by copying its table (Alembic's batch mode, used by
the revisions that need it).
"""

from __future__ import annotations

from alembic import context

from pincer.store.sql.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    transaction_per_migration=True,
    transactional_ddl=True,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
