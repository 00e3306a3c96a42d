"""One schema and one migration history for both databases (store/sql/schema.py, migrate.py).

A database made new and one an older pincer made (tests/store/legacy/: dumps of what the pincer
before this history wrote, on SQLite and PostgreSQL) both end at the tables of schema.py, column
by column, index by index, and the older one keeps every row it had.
"""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from pincer.core.errors import SchemaBehind, StoreError
from pincer.store.sql import HEAD, legacy, open_postgres, open_sqlite
from pincer.store.sql.migrate import MIGRATIONS_DIR, REVISIONS, prepare_sqlite, upgrade_postgres
from pincer.store.sql.schema import LEGACY_GUARD_VERSION, metadata
from tests.backends import postgres_server
from tests.store.legacy import main_postgres_sql, main_sqlite

# The tables a pincer before this history wrote, and the rows its dumps hold in each.
_DATA_TABLES = (
    "audit", "audit_head", "audit_chain", "approvals", "grants", "idempotency", "runs", "run_messages",
    "trigger_jobs", "trigger_firings", "trigger_deliveries", "ui_sign_ins",
)  # fmt: skip


def _rows(query: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every data table, sorted: ``query(sql)`` returns a statement's rows."""
    return {table: sorted(tuple(row) for row in query(f"SELECT * FROM {table}")) for table in _DATA_TABLES}


def _sqlite_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        return _rows(lambda sql: conn.execute(sql).fetchall())


def _postgres_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return _rows(lambda sql: conn.execute(sql).fetchall())


def _postgres_columns(url: str) -> dict[str, list[str]]:
    query = "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position"
    with psycopg.connect(url) as conn:
        return {t: [r[0] for r in conn.execute(query, (t,)).fetchall()] for t in _DATA_TABLES}


def _by_column(rows: dict[str, list[tuple[Any, ...]]], query: Any) -> dict[str, list[dict[str, Any]]]:
    """Rows as column -> value, so a table that gained columns compares on the ones it had."""
    named = {}
    for table, table_rows in rows.items():
        columns = query(table)
        named[table] = [dict(zip(columns, row, strict=True)) for row in table_rows]
    return named


def _differences(engine: sa.Engine) -> list[Any]:
    """What Alembic finds different between the database and schema.py (types included)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        return not (type_ == "table" and name in ("alembic_version", "pincer_schema"))

    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include})
            found = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    if engine.dialect.name == "sqlite":
        # SQLite lets a TEXT PRIMARY KEY column hold NULL unless it says NOT NULL, which the older
        # ladder's tables did not say (schema.py's do). No store writes a NULL key, and saying it
        # now would mean copying each of those tables, the audit log included: left as it is.
        found = [d for d in found if not (isinstance(d, list) and d[0][0] == "modify_nullable"
                                         and d[0][3] in _SQLITE_KEYS.get(d[0][2], ()))]  # fmt: skip
    return found


_SQLITE_KEYS = {
    "approvals": ("id",), "audit": ("id",), "audit_chain": ("one",), "audit_head": ("one",), "grants": ("id",),
    "runs": ("id",), "trigger_firings": ("id",), "trigger_jobs": ("name",), "trigger_lease": ("one",),
    "ui_sign_ins": ("key",),
}  # fmt: skip


def _sqlite_engine(path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{path}")


def _postgres_engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield postgres_server().new_database()


def test_the_revisions_this_pincer_knows_are_alembic_s_scripts_in_order() -> None:
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    walked = [rev.revision for rev in script.walk_revisions()]
    assert tuple(reversed(walked)) == REVISIONS and script.get_current_head() == HEAD


def test_a_new_sqlite_database_is_schema_py_at_head(tmp_path: Path) -> None:
    path = tmp_path / "pincer.db"
    assert prepare_sqlite(path).empty
    assert _differences(_sqlite_engine(path)) == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LEGACY_GUARD_VERSION["sqlite"]
        assert conn.execute("SELECT last_id, last_hash FROM audit_head").fetchall() == [(0, "0" * 64)]
        assert conn.execute("SELECT version FROM grants_version").fetchall() == [(0,)]
    assert prepare_sqlite(path).at_head  # opening again changes nothing


def test_a_new_postgres_database_is_schema_py_at_head(pg_url: str) -> None:
    before, after = upgrade_postgres(pg_url)
    assert before.empty and after.at_head
    assert _differences(_postgres_engine(pg_url)) == []
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        assert conn.execute("SELECT MAX(version) FROM pincer_schema").fetchone() == (
            LEGACY_GUARD_VERSION["postgresql"],
        )
    again, _ = upgrade_postgres(pg_url)
    assert again.at_head


def test_a_sqlite_database_of_the_pincer_before_keeps_every_row_and_ends_at_schema_py(tmp_path: Path) -> None:
    path = main_sqlite(tmp_path)
    before = _sqlite_rows(path)
    assert len(before["audit"]) == 6 and before["approvals"] and before["trigger_firings"]
    with sqlite3.connect(path) as conn:
        old_columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in _DATA_TABLES}
    state = prepare_sqlite(path)
    assert (state.revision, state.legacy) == (None, legacy.SQLITE_LAST)
    after = _sqlite_rows(path)
    with sqlite3.connect(path) as conn:
        new_columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in _DATA_TABLES}
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        # Older pincers read user_version: past the last they knew, they refuse the file.
        assert conn.execute("PRAGMA user_version").fetchone()[0] > legacy.SQLITE_LAST
    old = _by_column(before, old_columns.__getitem__)
    new = _by_column(after, new_columns.__getitem__)
    for table in _DATA_TABLES:
        assert [{k: row[k] for k in old_columns[table]} for row in new[table]] == old[table], table
    assert _differences(_sqlite_engine(path)) == []


def test_a_postgres_database_of_the_pincer_before_keeps_every_row_and_ends_at_schema_py(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(main_postgres_sql().encode())
    before = _postgres_rows(pg_url)
    assert len(before["audit"]) == 6 and before["approvals"] and before["trigger_firings"]
    old_columns = _postgres_columns(pg_url)
    state, after_state = upgrade_postgres(pg_url)
    assert (state.revision, state.legacy, after_state.revision) == (None, legacy.POSTGRES_LAST, HEAD)
    # Compared on the columns each table had: a table that gained columns keeps every value.
    old = _by_column(before, old_columns.__getitem__)
    new = _by_column(_postgres_rows(pg_url), _postgres_columns(pg_url).__getitem__)
    for table in _DATA_TABLES:
        assert [{k: row[k] for k in old_columns[table]} for row in new[table]] == old[table], table
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT MAX(version) FROM pincer_schema").fetchone()[0] > legacy.POSTGRES_LAST
    assert _differences(_postgres_engine(pg_url)) == []


def test_a_sqlite_database_of_an_older_step_of_the_old_ladder_arrives_too(tmp_path: Path) -> None:
    """A database from before approvals named their run (the old ladder's version 5)."""
    path = main_sqlite(tmp_path, empty=True)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.executescript(
            "BEGIN; ALTER TABLE approvals DROP COLUMN run_id; ALTER TABLE approvals DROP COLUMN tainted_by;"
            " PRAGMA user_version = 5; COMMIT;"
        )
        conn.execute(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
            "VALUES ('old1', 1, 9e12, 'main', 'write_file', '{}', '[]', '[]', 'asks by default', 'pending')"
        )
    assert prepare_sqlite(path).legacy == 5
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, run_id, tainted_by FROM approvals").fetchall() == [("old1", None, None)]
    assert _differences(_sqlite_engine(path)) == []


def test_a_postgres_database_of_an_older_step_of_the_old_ladder_arrives_too(pg_url: str) -> None:
    """A store upgraded before approvals named their run (the old ladder's version 2)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(legacy._PG_VERSION_TABLE)
        for version, script in enumerate(legacy._PG_STEPS[:2], start=1):
            for statement in (part.strip() for part in script.split(";\n")):
                if statement:
                    conn.execute(statement.encode())
            conn.execute("INSERT INTO pincer_schema (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
            "VALUES ('old1', 1, 9e12, 'main', 'write_file', '{}', '[]', '[]', 'asks by default', 'pending')"
        )
    before, _ = upgrade_postgres(pg_url)
    assert (before.revision, before.legacy) == (None, 2)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT id, run_id, tainted_by FROM approvals").fetchall() == [("old1", None, None)]
    assert _differences(_postgres_engine(pg_url)) == []


def test_a_database_a_newer_pincer_wrote_is_refused_untouched(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "pincer.db"
    prepare_sqlite(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer pincer") as info:
        prepare_sqlite(path)
    assert "9999" in info.value.message
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999",)]
    upgrade_postgres(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer pincer"):
        upgrade_postgres(pg_url)


@pytest.mark.anyio
async def test_a_gateway_refuses_a_postgres_database_not_at_head_and_names_the_command(pg_url: str) -> None:
    # SchemaBehind: a CLI act's record then waits for `pincer db upgrade` (store/pending_acts.py)
    with pytest.raises(SchemaBehind, match="no pincer schema yet") as info:
        await open_postgres(pg_url)
    assert "pincer db upgrade" in (info.value.hint or "")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(main_postgres_sql().encode())
    with pytest.raises(SchemaBehind, match="older pincer") as info:
        await open_postgres(pg_url)
    upgrade_postgres(pg_url)
    db = await open_postgres(pg_url)
    await db.aclose()


def test_two_upgrades_at_once_apply_each_revision_once(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(main_postgres_sql().encode())
    results: list[Any] = []

    def one() -> None:
        try:
            results.append(upgrade_postgres(pg_url))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(isinstance(r, tuple) for r in results), results
    assert sum(1 for before, _ in results if not before.at_head) == 1  # one of them migrated
    with psycopg.connect(pg_url) as conn:
        last, guard = legacy.POSTGRES_LAST, LEGACY_GUARD_VERSION["postgresql"]
        assert conn.execute("SELECT version FROM pincer_schema ORDER BY version").fetchall()[-2:] == [(last,), (guard,)]


@pytest.mark.anyio
async def test_an_open_of_a_database_at_head_imports_neither_alembic_nor_sqlalchemy(tmp_path: Path) -> None:
    """Every command opens the database: at head it costs sqlite3 alone (SQLAlchemy's import is
    a quarter of a second here)."""
    db = await open_sqlite(tmp_path)
    await db.aclose()
    probe = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from pincer.store.sql import open_sqlite\n"
        "async def main():\n"
        f"    db = await open_sqlite(Path({str(tmp_path)!r}))\n"
        "    await db.fetch_all(__import__('pincer.store.sql', fromlist=['Sql']).Sql('SELECT 1'))\n"
        "    await db.aclose()\n"
        "anyio.run(main)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'sqlalchemy'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def _log_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.name, record.getMessage()) for record in caplog.records]


def test_an_embedder_logging_at_info_hears_pincer_once_per_upgrade_and_alembic_not_at_all(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Alembic announces its context at INFO on every run ("Context impl SQLiteImpl", "Will assume
    non-transactional DDL"); a program embedding pincer that logs at INFO hears one line of
    pincer's when a store is made or upgraded, and nothing on an open that changes nothing."""
    caplog.set_level(logging.INFO)
    new = tmp_path / "new" / "pincer.db"
    prepare_sqlite(new)
    assert _log_lines(caplog) == [("pincer.store.sql.migrate", f"{new}: made at schema {HEAD}")]
    caplog.clear()
    prepare_sqlite(new)
    assert _log_lines(caplog) == []

    older = main_sqlite(tmp_path / "older")
    prepare_sqlite(older)
    assert _log_lines(caplog) == [
        (
            "pincer.store.sql.migrate",
            f"{older}: upgraded from the schema of an older pincer (version {legacy.SQLITE_LAST}) to schema {HEAD}",
        )
    ]
    # Only for the migration: Alembic's logger is as the embedder left it (unset) afterwards.
    assert logging.getLogger("alembic").level == logging.NOTSET


def test_a_level_the_embedder_gave_alembic_is_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="alembic")  # the embedder asked to hear Alembic
    prepare_sqlite(main_sqlite(tmp_path))
    alembic_lines = [message for name, message in _log_lines(caplog) if name.startswith("alembic")]
    assert "Context impl SQLiteImpl." in alembic_lines, _log_lines(caplog)
    assert logging.getLogger("alembic").level == logging.INFO


def test_the_postgres_upgrade_says_so_once_and_alembic_keeps_quiet(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upgrade_postgres(pg_url)
    lines = _log_lines(caplog)
    assert [name for name, _ in lines] == ["pincer.store.sql.migrate"], lines
    assert lines[0][1].endswith(f": made at schema {HEAD}")
    caplog.clear()
    upgrade_postgres(pg_url)
    assert _log_lines(caplog) == []


_PUT_BACK_TO_0007 = (  # its version says 0007; one of 0008's indexes lost, 0007's status index back
    "UPDATE alembic_version SET version_num = '0007'",
    "DROP INDEX approvals_closed",
    "CREATE INDEX approvals_status ON approvals (status)",
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
    "answered_at, closed_at) VALUES ('kept', 1, 50, 'main', 't', '{}', '[]', '[]', 'r', 'deny', 40, 45)",
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
    "answered_at) VALUES ('old', 1, 50, 'main', 't', '{}', '[]', '[]', 'r', 'expired', NULL)",
)


def test_0008_over_a_database_put_back_to_0007_by_hand_skips_what_it_has_and_makes_what_it_lacks(
    tmp_path: Path, pg_url: str
) -> None:
    """Revision 0008 again over a database that already has its column and some of its indexes:
    it keeps those (and a closed_at already written), makes the lost index, drops 0007's status
    index, and fills closed_at only where it is missing. Both databases end at schema.py."""
    path = tmp_path / "pincer.db"
    prepare_sqlite(path)
    with sqlite3.connect(path) as conn:
        for statement in _PUT_BACK_TO_0007:
            conn.execute(statement)
    assert prepare_sqlite(path).revision == "0007"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, closed_at FROM approvals ORDER BY id").fetchall() == [("kept", 45.0), ("old", 50.0)]
    assert _differences(_sqlite_engine(path)) == []
    upgrade_postgres(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in _PUT_BACK_TO_0007:
            conn.execute(statement.encode())
    state, after = upgrade_postgres(pg_url)
    assert (state.revision, after.revision) == ("0007", HEAD)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT id, closed_at FROM approvals ORDER BY id").fetchall() == [("kept", 45.0), ("old", 50.0)]


# -- a database at a revision of this history, not the head ------------------------------------


def _upgrade_to(engine: sa.Engine, revision: str) -> None:
    """Run this history's revisions up to ``revision`` only, as a pincer of that revision did."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        conn.commit()
    engine.dispose()


def _columns(engine: sa.Engine) -> dict[str, list[str]]:
    """Each table's columns, alembic_version left out."""
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            names = [t for t in inspector.get_table_names() if t != "alembic_version"]
            return {t: [c["name"] for c in inspector.get_columns(t)] for t in names}
    finally:
        engine.dispose()


def _every_row(engine: sa.Engine, on: dict[str, list[str]] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, on the columns it has (or on those of ``on``: a table's columns
    before an upgrade added some)."""
    columns = on or _columns(engine)
    try:
        with engine.connect() as conn:
            rows = {t: conn.execute(sa.text(f"SELECT {', '.join(c)} FROM {t}")).all() for t, c in columns.items()}
    finally:
        engine.dispose()
    return {table: sorted((tuple(row) for row in found), key=repr) for table, found in rows.items()}


_AT_0005 = (
    "INSERT INTO people (name, email, roles, status, created_at, created_by) "
    "VALUES ('ann', 'ann@example.org', '[\"admin\"]', 'active', 1, 'setup')",
    "INSERT INTO person_tokens (id, person, digest, created_at, expires_at) VALUES ('t1', 'ann', 'ab', 1, 9e12)",
    "INSERT INTO pincer_instances (id, tag, host, pid, started_at, heartbeat_at) VALUES ('i1', 't', 'h', 7, 1, 2)",
)


def _revision_0005_sqlite(tmp_path: Path) -> Path:
    """A SQLite database a pincer of revision 0005 wrote: the old ladder's rows, then 0001..0005."""
    from pincer.store.sql.migrate import _sqlite_engine as migrate_engine

    path = main_sqlite(tmp_path)
    _upgrade_to(migrate_engine(path), "0005")
    with sqlite3.connect(path) as conn:
        for statement in _AT_0005:
            conn.execute(statement)
    return path


def _columns_0006_0007_add(inspector: Any) -> set[str]:
    wanted = {("person_tokens", "roles"), ("runs", "person"), ("tasks", "person"), ("pincer_instances", "kind"),
              ("pincer_instances", "home"), ("pincer_instances", "url")}  # fmt: skip
    return {f"{t}.{c}" for t, c in wanted if c in {col["name"] for col in inspector.get_columns(t)}}


def test_a_sqlite_database_at_revision_0005_gains_what_0006_and_0007_add_and_keeps_its_rows(tmp_path: Path) -> None:
    path = _revision_0005_sqlite(tmp_path)
    engine = _sqlite_engine(path)
    with engine.connect() as conn:
        assert _columns_0006_0007_add(sa.inspect(conn)) == set()  # what a pincer of 0005 left
    old_columns = _columns(engine)
    before = _every_row(engine)
    assert before["people"] and before["audit"] and before["pincer_instances"]
    state = prepare_sqlite(path)
    assert state.revision == "0005"
    with engine.connect() as conn:
        assert len(_columns_0006_0007_add(sa.inspect(conn))) == 6
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [(HEAD,)]
        # the rows from before: the new columns empty, the old ones as they were
        assert conn.execute(sa.text("SELECT roles FROM person_tokens")).all() == [(None,)]
        assert conn.execute(sa.text("SELECT kind, home, url FROM pincer_instances")).all() == [(None, None, None)]
    assert _every_row(engine, on=old_columns) == before
    assert _differences(engine) == []


def test_a_postgres_database_at_revision_0005_gains_what_0006_and_0007_add_and_keeps_its_rows(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(main_postgres_sql().encode())
    engine = _postgres_engine(pg_url)
    _upgrade_to(engine, "0005")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in _AT_0005:
            conn.execute(statement.encode())
    with engine.connect() as conn:
        assert _columns_0006_0007_add(sa.inspect(conn)) == set()
    old_columns = _columns(engine)
    before = _every_row(engine)
    assert before["people"] and before["audit"] and before["pincer_instances"]
    state, after_state = upgrade_postgres(pg_url)
    assert (state.revision, after_state.revision) == ("0005", HEAD)
    with engine.connect() as conn:
        assert len(_columns_0006_0007_add(sa.inspect(conn))) == 6
        indexes = {index["name"] for index in sa.inspect(conn).get_indexes("approvals")}
        assert "approvals_created" in indexes
    assert _every_row(engine, on=old_columns) == before
    assert _differences(engine) == []


# Put back by hand: a database at the head whose alembic_version was set to an older revision
# (a backup's version row restored over a newer file, an operator's UPDATE). Each revision after
# it finds its tables, columns and index already there and must leave them, and their rows, alone.
_PUT_BACK_TO = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008")


@pytest.mark.parametrize("revision", _PUT_BACK_TO)
def test_a_sqlite_database_put_back_to_an_older_revision_by_hand_opens_at_head_unchanged(
    tmp_path: Path, revision: str
) -> None:
    path = tmp_path / "pincer.db"
    prepare_sqlite(path)
    with sqlite3.connect(path) as conn:
        for statement in _AT_0005:
            conn.execute(statement)
        conn.execute("UPDATE person_tokens SET roles = '[\"viewer\"]'")
        conn.execute("UPDATE pincer_instances SET kind = 'gateway', home = '/h', url = 'http://127.0.0.1:1'")
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    before = _every_row(_sqlite_engine(path))
    state = prepare_sqlite(path)
    assert state.revision == revision
    assert _every_row(_sqlite_engine(path)) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
    assert _differences(_sqlite_engine(path)) == []


@pytest.mark.parametrize("revision", _PUT_BACK_TO)
def test_a_postgres_database_put_back_to_an_older_revision_by_hand_opens_at_head_unchanged(
    pg_url: str, revision: str
) -> None:
    upgrade_postgres(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in _AT_0005:
            conn.execute(statement.encode())
        conn.execute("UPDATE person_tokens SET roles = '[\"viewer\"]'")
        conn.execute("UPDATE pincer_instances SET kind = 'gateway', home = '/h', url = 'http://127.0.0.1:1'")
        conn.execute("UPDATE alembic_version SET version_num = %s", (revision,))
    before = _every_row(_postgres_engine(pg_url))
    state, after_state = upgrade_postgres(pg_url)
    assert (state.revision, after_state.revision) == (revision, HEAD)
    assert _every_row(_postgres_engine(pg_url)) == before
    assert _differences(_postgres_engine(pg_url)) == []


# -- revision 0009: the runs' and the payloads' indexes --------------------------------------

_AT_0008 = (
    "INSERT INTO runs (id, created_at, updated_at, ended_at, skill, params, trigger, session, provider, model, "
    "status, usage) VALUES ('ended', 1, 5, 4, 'daily', '{}', 'cli', 'main', 'p', 'm', 'done', '{}')",
    # finished, but written without ended_at (by hand, or a pincer before ended_at was always set)
    "INSERT INTO runs (id, created_at, updated_at, ended_at, skill, params, trigger, session, provider, model, "
    "status, usage) VALUES ('no-end', 2, 7, NULL, NULL, '{}', 'cli', 'agent', 'p', 'm', 'failed', '{}')",
    "INSERT INTO runs (id, created_at, updated_at, ended_at, skill, params, trigger, session, provider, model, "
    "status, usage) VALUES ('running', 3, 8, NULL, NULL, '{}', 'cli', 'main', 'p', 'm', 'running', '{}')",
    "INSERT INTO run_messages (run_id, seq, ts, role, body) VALUES ('ended', 1, 1, 'user', 'hi')",
    "INSERT INTO trigger_firings (id, ts, kind, name, fired_by, session, params, payload, run_id, status) "
    "VALUES ('f1', 1, 'hook', 'h', 'hook:h', 'main', '{}', '{}', 'ended', 'done')",
)
_INDEXES_0009 = {
    "runs": {"runs_created": ["created_at", "id"], "runs_session_created": ["session", "created_at", "id"],
             "runs_status_created": ["status", "created_at", "id"], "runs_skill_created": ["skill", "created_at", "id"],
             "runs_ended": ["ended_at", "id"]},
    "trigger_firings": {"trigger_firings_payload": ["ts", "id"]},
}  # fmt: skip


def _indexes_0009(engine: sa.Engine) -> dict[str, dict[str, list[str]]]:
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            return {t: {str(i["name"]): list(i["column_names"]) for i in inspector.get_indexes(t) if i["name"] in wanted}
                    for t, wanted in _INDEXES_0009.items()}  # fmt: skip
    finally:
        engine.dispose()


def _check_0008_to_0009(engine: sa.Engine, upgrade: Any) -> None:
    """``engine``'s database at revision 0008 with ``_AT_0008`` in it: 0009 gives it its indexes
    (``runs_created`` one column longer), keeps every row, and fills ``ended_at`` of a finished run
    that lacked it (what the runs' retention reads by) from ``updated_at``, and only there."""
    old = _indexes_0009(engine)
    assert old == {"runs": {"runs_created": ["created_at"]}, "trigger_firings": {}}, old
    old_columns = _columns(engine)
    before = _every_row(engine)
    assert len(before["runs"]) >= 3 and before["trigger_firings"]
    upgrade()
    assert _indexes_0009(engine) == _INDEXES_0009
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [(HEAD,)]
        ended = dict(conn.execute(sa.text("SELECT id, ended_at FROM runs WHERE id IN ('ended', 'no-end', 'running')")).all())
    engine.dispose()
    assert ended == {"ended": 4.0, "no-end": 7.0, "running": None}
    after = _every_row(engine, on=old_columns)
    assert {t: rows for t, rows in after.items() if t != "runs"} == {t: rows for t, rows in before.items() if t != "runs"}
    patched = [tuple(7.0 if (row[0] == "no-end" and c == "ended_at") else v for c, v in zip(old_columns["runs"], row,
               strict=True)) for row in before["runs"]]  # fmt: skip
    assert after["runs"] == sorted(patched, key=repr)
    assert _differences(engine) == []


def test_a_sqlite_database_at_revision_0008_gains_0009s_indexes_and_keeps_its_rows(tmp_path: Path) -> None:
    from pincer.store.sql.migrate import _sqlite_engine as migrate_engine

    path = main_sqlite(tmp_path)
    _upgrade_to(migrate_engine(path), "0008")
    with sqlite3.connect(path) as conn:
        for statement in _AT_0008:
            conn.execute(statement)

    def upgrade() -> None:
        assert prepare_sqlite(path).revision == "0008"

    _check_0008_to_0009(_sqlite_engine(path), upgrade)


def test_a_postgres_database_at_revision_0008_gains_0009s_indexes_and_keeps_its_rows(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(main_postgres_sql().encode())
    engine = _postgres_engine(pg_url)
    _upgrade_to(engine, "0008")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in _AT_0008:
            conn.execute(statement.encode())

    def upgrade() -> None:
        state, after_state = upgrade_postgres(pg_url)
        assert (state.revision, after_state.revision) == ("0008", HEAD)

    _check_0008_to_0009(engine, upgrade)


# -- a revision that fails, a server that is not there -----------------------------------------


def test_a_sqlite_revision_that_fails_leaves_the_one_before_and_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "pincer.db"
    prepare_sqlite(path)
    with sqlite3.connect(path) as conn:  # put back to 0006 by hand, and a table 0007 changes dropped
        conn.execute("UPDATE alembic_version SET version_num = '0006'")
        conn.execute("DROP TABLE pincer_instances")
    with pytest.raises(StoreError, match=f"cannot migrate the pincer database {path} to schema {HEAD}") as info:
        prepare_sqlite(path)
    assert "NoSuchTableError: pincer_instances" in info.value.message
    assert "restore pincer.db from a backup" in (info.value.hint or "")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0006",)]


def test_a_postgres_revision_that_fails_leaves_the_one_before_and_says_what_to_do(pg_url: str) -> None:
    upgrade_postgres(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0006'")
        conn.execute("DROP TABLE pincer_instances")
    with pytest.raises(StoreError, match="could not be upgraded: NoSuchTableError: pincer_instances") as info:
        upgrade_postgres(pg_url)
    assert "running `pincer db upgrade` again goes on where it stopped" in (info.value.hint or "")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0006",)]


def test_upgrading_a_postgres_server_that_is_not_there_names_it_without_its_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError) as info:
        upgrade_postgres(f"postgresql://pincer:s3cret-pw@127.0.0.1:{port}/pincer?connect_timeout=5")
    shown = f"{info.value.message} {info.value.hint or ''}"
    assert f"127.0.0.1:{port}" in shown and "s3cret-pw" not in shown
