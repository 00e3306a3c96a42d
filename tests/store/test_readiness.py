"""What `GET /readyz` asks of the stores (store/readiness.py), on both backends: one word per
check, the reason only in the log, and never the database's address in either."""

from __future__ import annotations

import logging

import pytest

from pincer.store.readiness import AUDIT_BACKLOG_MAX, audit_check, database_check
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def test_the_database_is_ok_at_this_schema_and_a_mismatch_otherwise(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    db = await backend.db()
    assert await database_check(db) == "ok"
    backend.tamper("UPDATE alembic_version SET version_num = ?", ("0004",))  # an older pincer's, or put back
    caplog.set_level(logging.WARNING, logger="pincer.store.readiness")
    assert await database_check(db) == "schema_mismatch"  # asked of the gateway running since
    assert "not at this pincer's schema" in caplog.text


async def test_a_database_that_does_not_answer_is_unreachable_and_its_address_stays_out_of_the_log(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    db = await backend.db()
    await db.aclose()
    caplog.set_level(logging.WARNING, logger="pincer.store.readiness")
    assert await database_check(db) == "unreachable"
    assert "does not answer (StoreError)" in caplog.text
    assert not backend.url or backend.url not in caplog.text
    assert "pincer.db" not in caplog.text


def test_the_audit_writer_keeps_up_until_its_backlog_passes_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    assert audit_check(0) == "ok" and audit_check(AUDIT_BACKLOG_MAX) == "ok"
    with caplog.at_level(logging.WARNING, logger="pincer.store.readiness"):
        assert audit_check(AUDIT_BACKLOG_MAX + 1) == "backlog"
    assert f"{AUDIT_BACKLOG_MAX + 1} audit records wait" in caplog.text
