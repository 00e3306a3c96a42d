"""Issue 34 item 4: the audit log could be rewritten without the key.

With write access to the database only (not to ``audit.key``), an attacker edited a record,
deleted the last one, re-chained every row with the public plain SHA-256 recipe, moved the head
to the plain chain's end and set the marker (``audit_chain``) back to pending (``keyed_from``
NULL). Nothing outside the database said the log had ever been keyed, so the next open (``pincer
audit verify`` itself opens the store) signed a fresh marker over the forged log, and verify said
"intact". On PostgreSQL the same open signed a fresh marker over a wiped log. Each attack below,
on both backends, was seen verifying as intact on main (or, for the plain re-chain on PostgreSQL,
failing without saying what it found); now the anchor beside the key (``audit-anchor.json``, on
PostgreSQL ``audit-anchor-pg.json``, written once) says where the log was keyed, the open never signs
a marker over a log its anchor says was keyed, and verify names what it found on every path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.core.values import CallRequest
from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
from pincer.service import Pincer
from pincer.store import AuditLog
from pincer.store.anchor import ANCHOR_FILE, SHARED_ANCHOR_FILE
from pincer.store.chain import GENESIS_HASH, ChainKey, plain_chain_hash
from pincer.store.sql import open_postgres, open_sqlite
from tests.adversarial.test_secrets_and_audit import _cli, _echo_runtime
from tests.backends import postgres_server
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import csrf_of, sign_in

pytestmark = pytest.mark.anyio

_CHAIN_COLUMNS = {"id", "run_id", "prev_hash", "hash"}


class AttackedHome:
    """A pincer home whose audit log lives in SQLite (``pincer.db``) or in PostgreSQL, and the
    attacker's hand on that database (nothing else of the home)."""

    def __init__(self, kind: str, home: Path, *, url: str = "") -> None:
        self.kind = kind
        self.home = home
        self.url = url
        home.mkdir(parents=True, exist_ok=True)
        if kind == "postgres" and not url:
            self.url = postgres_server().new_database()
            (home / "config.toml").write_text(f'[store]\nurl = "{self.url}"\n\n[triggers]\nenabled = false\n')
            upgraded = _cli(home, "db", "upgrade", "--json")
            assert upgraded.returncode == 0, upgraded.stderr

    @property
    def anchor(self) -> Path:
        return self.home / (SHARED_ANCHOR_FILE if self.kind == "postgres" else ANCHOR_FILE)

    async def calls(self, count: int) -> None:
        secret_key = load_or_create_key(self.home, None)  # the home's own, as the gateway on it uses
        async with Pincer.open(self.home, secret_key=secret_key, builtins=False, scripts=False, wasm=False) as pincer:
            await pincer.add_runtime(_echo_runtime())
            for i in range(count):
                assert (await pincer.call(CallRequest(tool="echo", args={"text": f"call {i}"}))).ok

    def sql(self, *statements: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run statements as someone who can write the database; the last one's rows."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.home / "pincer.db")
            try:
                rows: list[tuple[Any, ...]] = []
                for statement in statements:
                    rows = conn.execute(statement, params if "?" in statement else ()).fetchall()
                conn.commit()
                return rows
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = []
            for statement in statements:
                cursor = conn.execute(statement.replace("?", "%s"), params if "?" in statement else ())
                rows = cursor.fetchall() if cursor.description else []
            return rows

    def fields(self) -> list[str]:
        """The audit columns the chain covers, in the order the recipe hashes them."""
        if self.kind == "sqlite":
            names = [row[1] for row in self.sql("PRAGMA table_info(audit)")]
        else:
            names = [row[0] for row in self.sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'audit' ORDER BY ordinal_position"
            )]  # fmt: skip
        return [name for name in names if name not in _CHAIN_COLUMNS]

    def rechain_plain(self) -> None:
        """Every record re-chained with the public plain SHA-256 recipe, the head moved to its end
        (without a MAC), the marker set back to pending: a log that claims it was never keyed."""
        fields = self.fields()
        rows = self.sql(f"SELECT id, {', '.join(fields)}, run_id FROM audit ORDER BY id")
        prev = GENESIS_HASH
        for row in rows:
            values = tuple(row[1:-1]) if row[-1] is None else tuple(row[1:])
            digest = plain_chain_hash(row[0], values, prev)
            self.sql("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", params=(prev, digest, row[0]))
            prev = digest
        self.sql("UPDATE audit_head SET last_id = ?, last_hash = ?, mac = NULL WHERE one = 1", params=(len(rows), prev))
        self.unkey()

    def unkey(self) -> None:
        self.sql("UPDATE audit_chain SET keyed_from = NULL, key_id = NULL, plain_head = NULL, mac = NULL, "
                 "head_keyed = 0 WHERE one = 1")  # fmt: skip

    def downgrade(self) -> None:
        """The attack of the issue: edit record 2, delete the last record, re-chain as plain."""
        (last,) = self.sql("SELECT MAX(id) FROM audit")[0]
        self.sql("UPDATE audit SET reason = 'nothing happened here' WHERE id = 2", f"DELETE FROM audit WHERE id = {last}")
        self.rechain_plain()

    def wipe(self) -> None:
        """Every record deleted, the head put back to an empty log's, the marker to pending."""
        self.sql("DELETE FROM audit", f"UPDATE audit_head SET last_id = 0, last_hash = '{GENESIS_HASH}', mac = NULL")
        self.unkey()

    def audit_key(self) -> bytes:
        return load_or_create_key(self.home, None, place=AUDIT_KEY)

    async def open_without_anchor(self) -> None:
        """Open the log as a pincer that never saw this home's anchor (an older one, or one
        whose home lacks it) would: it keys a pending marker afresh."""
        db = await (open_sqlite(self.home) if self.kind == "sqlite" else open_postgres(self.url, size=1))
        try:
            await AuditLog.open(db, key=self.audit_key())
        finally:
            await db.aclose()

    def as_before_anchors(self) -> None:
        """Take the home back to before anchors: no chain id (column and all), the marker's MAC
        as it was computed then, no anchor file; on PostgreSQL the schema one step back."""
        keyed_from, plain_head = self.sql("SELECT keyed_from, plain_head FROM audit_chain")[0]
        old_mac = ChainKey(self.audit_key()).marker_mac(keyed_from=keyed_from, plain_head=plain_head, head_keyed=True)
        self.sql("ALTER TABLE audit_chain DROP COLUMN chain_id", "UPDATE audit_chain SET mac = ?", params=(old_mac,))
        # The schema's version as the pincer of then wrote it (before the one migration history:
        # no Alembic revision), so the next open migrates it as it would that home's.
        self.sql("DROP TABLE alembic_version")
        if self.kind == "sqlite":
            self.sql("PRAGMA user_version = 7")
        else:  # schema 6: the later steps' columns go too (v8: the approvals' caller)
            self.sql("ALTER TABLE approvals DROP COLUMN caller", "ALTER TABLE approvals DROP COLUMN gone_recorded",
                     "DELETE FROM pincer_schema", "INSERT INTO pincer_schema (version) VALUES (6)")  # fmt: skip
        self.anchor.unlink()

    def marker(self) -> tuple[Any, ...] | None:
        rows = self.sql("SELECT keyed_from, key_id FROM audit_chain")
        return rows[0] if rows else None


@pytest.fixture(params=["sqlite", "postgres"])
def attacked(request: pytest.FixtureRequest, tmp_path: Path) -> AttackedHome:
    return AttackedHome(request.param, tmp_path / "home")


def _verify(home: Path) -> tuple[int, dict[str, Any]]:
    result = _cli(home, "audit", "verify", "--json")
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def _broken_report(home: Path) -> str:
    code, report = _verify(home)
    assert code == 1 and report["ok"] is False, report
    message: str = report["error"]["message"]
    return message


async def test_a_log_rechained_as_plain_and_unkeyed_is_tampering(attacked: AttackedHome) -> None:
    """Failed on main (SQLite): verify said "intact: 4 records" (3 of them "plain", the open had
    signed a fresh marker at record 4). On PostgreSQL main refused it as "audit record 1 was
    altered" without a word about the marker."""
    await attacked.calls(5)
    attacked.downgrade()
    message = _broken_report(attacked.home)
    assert "keyed" in message and "from record 1" in message and attacked.anchor.name in message, message
    assert "never keyed" in message, message
    # Opening the home (verify opens it) signed nothing over the forged log, and never will.
    assert attacked.marker() == (None, None)
    await attacked.calls(1)
    assert attacked.marker() == (None, None)
    assert "never keyed" in _broken_report(attacked.home)


async def test_a_wiped_and_unkeyed_log_is_tampering(attacked: AttackedHome) -> None:
    """Failed on main on both backends: every record deleted, the head put back to an empty
    log's and the marker to pending; the next open signed both, and verify said "intact: 0
    records"."""
    await attacked.calls(3)
    attacked.wipe()
    message = _broken_report(attacked.home)
    assert "never keyed" in message and attacked.anchor.name in message, message
    assert attacked.marker() == (None, None)


async def test_a_log_that_claims_it_was_keyed_later_is_tampering(attacked: AttackedHome) -> None:
    """Failed on main (SQLite): after the downgrade a pincer opened the home, signed the marker
    at record 5 and went on recording under the key; verify said "intact: 6 records, records 1 to
    4 written before the audit key existed". Now nobody signs; were the marker signed by a pincer
    that never saw the anchor, verify still compares it with the anchor."""
    await attacked.calls(5)
    attacked.downgrade()
    await attacked.calls(2)
    message = _broken_report(attacked.home)
    assert "from record 1" in message, message


async def test_a_marker_replaced_by_a_fresh_pending_row_is_tampering(attacked: AttackedHome) -> None:
    """Failed on main (SQLite): the keyed marker row deleted and a new database's pending row
    put in its place (with the plain re-chain): the open signed it, verify said intact."""
    await attacked.calls(4)
    attacked.rechain_plain()
    attacked.sql("DELETE FROM audit_chain", "INSERT INTO audit_chain (one) VALUES (1)")
    message = _broken_report(attacked.home)
    assert "never keyed" in message and attacked.anchor.name in message, message


async def test_a_deleted_marker_row_is_tampering_and_names_the_anchor(attacked: AttackedHome) -> None:
    """The marker row deleted outright. Main already refused this ("the marker is missing");
    it must still, and now says what the anchor holds."""
    await attacked.calls(3)
    attacked.rechain_plain()
    attacked.sql("DELETE FROM audit_chain")
    message = _broken_report(attacked.home)
    assert "missing" in message and attacked.anchor.name in message and "from record 1" in message, message


async def test_every_path_gives_the_same_verdict(attacked: AttackedHome) -> None:
    """The REST verify, the dashboard's Verify chain and ``pincer doctor`` say what the CLI says.
    Failed on main: REST 200 "ok", the dashboard "Chain intact", doctor "intact over 3 records"
    (on PostgreSQL doctor read the unused local SQLite log and said "intact over 0 records")."""
    await attacked.calls(4)
    attacked.downgrade()
    expected = _broken_report(attacked.home)
    doctor = _cli(attacked.home, "doctor", "--json")
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["audit chain"]["status"] == "fail" and checks["audit chain"]["detail"] == expected, checks
    with pincer_serve(attacked.home) as server, httpx.Client(base_url=server.info["url"], trust_env=False) as http:
        rest = http.get("/api/v1/audit/verify", headers={"Authorization": f"Bearer {server.token}"})
        assert rest.status_code == 409 and rest.json()["error"]["message"] == expected, rest.text
        sign_in(http, server.token)
        page = http.get("/ui/audit").text
        shown = http.post("/ui/audit/verify", data={"csrf_token": csrf_of(page)})
        assert shown.status_code == 409 and "never keyed" in shown.text and attacked.anchor.name in shown.text
    assert attacked.marker() == (None, None)


async def test_the_anchor_is_written_once_and_a_normal_open_never_rewrites_it(attacked: AttackedHome) -> None:
    await attacked.calls(2)
    written = attacked.anchor.read_bytes()
    assert attacked.anchor.stat().st_mode & 0o777 == 0o600
    anchor = json.loads(written)
    assert anchor["keyed_from"] == 1 and anchor["key_id"] == attacked.marker()[1]  # type: ignore[index]
    attacked.wipe()
    await attacked.calls(1)
    assert _verify(attacked.home)[0] == 1
    assert attacked.anchor.read_bytes() == written


async def test_a_forged_log_keyed_afresh_by_a_pincer_without_the_anchor_is_named(attacked: AttackedHome) -> None:
    """After the downgrade, a pincer that never saw the anchor keys the forged log (on SQLite at
    record 4, after 3 "plain" records; on PostgreSQL as a new chain). Failed on main: intact."""
    await attacked.calls(4)
    attacked.downgrade()
    await attacked.open_without_anchor()
    assert attacked.marker() != (None, None)
    message = _broken_report(attacked.home)
    if attacked.kind == "sqlite":
        assert "begins at record 4" in message and "from record 1" in message, message
    else:
        assert "begun again" in message, message


async def test_a_home_keyed_before_anchors_gets_its_anchor_on_first_open(attacked: AttackedHome) -> None:
    """An existing home with an existing key and a keyed log, from before anchors (SQLite schema
    7, PostgreSQL schema 6): it opens without a word of tampering, its chain gets an id and the home
    its anchor, it verifies intact and keeps growing; from then on the downgrade is reported."""
    await attacked.calls(3)
    attacked.as_before_anchors()
    if attacked.kind == "postgres":
        upgraded = _cli(attacked.home, "db", "upgrade", "--json")
        assert upgraded.returncode == 0 and json.loads(upgraded.stdout)["changed"] is True, upgraded.stderr
    code, report = _verify(attacked.home)  # its open anchors the log
    assert code == 0 and report["records"] == 3, report
    anchor = json.loads(attacked.anchor.read_text())
    ((chain_id,),) = attacked.sql("SELECT chain_id FROM audit_chain")
    assert anchor["chain_id"] == chain_id and len(chain_id) == 32 and anchor["keyed_from"] == 1
    await attacked.calls(2)
    code, report = _verify(attacked.home)
    assert code == 0 and report["records"] == 5, report
    attacked.downgrade()
    assert "never keyed" in _broken_report(attacked.home)


@pytest.fixture
def two_homes(tmp_path: Path) -> Iterator[tuple[AttackedHome, Path]]:
    """Two machines on one PostgreSQL: the first home, and a second one set up later with the
    same audit key but not the first one's anchor."""
    first = AttackedHome("postgres", tmp_path / "first")
    second = tmp_path / "second"
    second.mkdir()
    yield first, second


async def test_a_log_begun_again_from_another_home_is_named_on_the_home_that_knew_it(
    two_homes: tuple[AttackedHome, Path],
) -> None:
    """A shared log wiped and unkeyed, then opened by a machine whose home was set up without the
    anchor: that machine cannot know and keys the empty log afresh; every home that knew the log
    names it as begun again (on main every home said "intact: 0 records")."""
    first, second_home = two_homes
    await first.calls(3)
    for name in ("audit.key", "config.toml"):
        (second_home / name).write_bytes((first.home / name).read_bytes())
        (second_home / name).chmod(0o600)
    first.wipe()
    second = AttackedHome("postgres", second_home, url=first.url)
    await second.calls(1)  # no anchor here: it keys the log it finds, as a new machine would
    assert _verify(second_home)[0] == 0
    message = _broken_report(first.home)
    assert "begun again" in message and first.anchor.name in message, message
