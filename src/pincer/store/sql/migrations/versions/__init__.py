"""The revisions, oldest first by their ``down_revision`` (Alembic skips this file)."""
