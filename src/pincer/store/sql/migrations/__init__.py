"""The store's one migration history, for SQLite and PostgreSQL alike (Alembic; store/sql/migrate.py runs it)."""
