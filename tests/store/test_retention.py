"""``[retention]``: what finished long enough ago leaves the store; nothing open, nothing recent,
and never an audit record (store/retention.py). Both databases."""

from __future__ import annotations

import pytest

from pincer.store.retention import prune
from tests.store.conftest import Backend

DAY = 86_400.0
NOW = 100 * DAY


def _seed(backend: Backend) -> None:
    old, recent = NOW - 40 * DAY, NOW - 1 * DAY
    for approval_id, status, answered, expires in (("old-answered", "deny", old, old), ("old-expired", "expired", None, old),
                                                   ("recent", "allow_once", recent, recent), ("open", "pending", None, old)):  # fmt: skip
        backend.tamper(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
            "answered_at, session_kind, detail) VALUES (?, ?, ?, 'main', 't', '{}', '[]', '[]', 'r', ?, ?, 'main', '{}')",
            (approval_id, old, expires, status, answered),
        )
    for run_id, status, ended in (("old-run", "done", NOW - 100 * DAY + 1), ("new-run", "done", recent),
                                  ("running", "running", None)):  # fmt: skip
        backend.tamper(
            "INSERT INTO runs (id, created_at, updated_at, ended_at, params, trigger, session, provider, model, status, "
            "usage) VALUES (?, ?, ?, ?, '{}', 'cli', 'main', 'p', 'm', ?, '{}')",
            (run_id, 1.0, ended or 1.0, ended, status),
        )
        backend.tamper(
            "INSERT INTO run_messages (run_id, seq, ts, role, body) VALUES (?, 1, 1, 'user', 'hi')", (run_id,)
        )
    for firing_id, status, ts in (
        ("old-done", "done", old),
        ("old-open", "started", old),
        ("new-done", "done", recent),
    ):
        backend.tamper(
            "INSERT INTO trigger_firings (id, ts, kind, name, fired_by, session, params, payload, run_id, status) "
            "VALUES (?, ?, 'hook', 'h', 'hook:h', 'main', '{}', '{\"secret-ish\": 1}', 'r', ?)",
            (firing_id, ts, status),
        )


@pytest.mark.anyio
async def test_prune_removes_only_what_finished_long_ago(backend: Backend) -> None:
    db = await backend.db()  # made (SQLite) before rows go in behind its back
    _seed(backend)
    pruned = await prune(db, now=NOW, approvals_days=30, runs_days=90, webhook_payloads_days=30)
    assert pruned.to_dict() == {"approvals": 2, "runs": 1, "run_messages": 1, "webhook_payloads": 1}
    from pincer.store.sql import Sql

    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM approvals"))) == ["open", "recent"]
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM runs"))) == ["new-run", "running"]
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT run_id FROM run_messages"))) == ["new-run", "running"]
    payloads = dict(await db.fetch_all(Sql("SELECT id, payload FROM trigger_firings")))  # type: ignore[arg-type]
    assert payloads["old-done"] is None and payloads["old-open"] and payloads["new-done"]
    kept = await prune(db, now=NOW, approvals_days=0, runs_days=0, webhook_payloads_days=0)
    assert not any(kept.to_dict().values())
