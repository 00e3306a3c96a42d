"""A run whose process died is reported failed (a real second process wrote it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pincer.core.errors import RunNotFound, StoreError
from pincer.store.runs import RunStore
from pincer.store.sql import open_sqlite
from tests.store.conftest import Backend


@pytest.mark.anyio
async def test_a_running_run_whose_process_died_is_reported_failed(tmp_path: Path) -> None:
    code = (
        "import anyio; from pathlib import Path; from pincer.store.sql import open_sqlite; "
        "from pincer.store.runs import RunStore\n"
        "async def main():\n"
        f"    db = await open_sqlite(Path({str(tmp_path)!r}))\n"
        "    await RunStore(db).create(run_id='gone', skill=None, params={}, message=None, trigger='cli', "
        "session='main', provider='openai', model='x')\n"
        "    await db.aclose()\n"
        "anyio.run(main)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    db = await open_sqlite(tmp_path)
    try:
        store = RunStore(db)
        row = await store.get("gone")
        assert row.status == "failed" and row.error is not None and row.error["code"] == "run_orphaned"
        assert (await store.list())[0].status == "failed"
    finally:
        await db.aclose()


async def _run(store: RunStore, run_id: str, session: str = "main") -> None:
    await store.create(run_id=run_id, skill="triage", params={"repo": "x"}, message="go", trigger="cli",
                       session=session, provider="openai", model="m", now=100.0)  # fmt: skip


@pytest.mark.anyio
async def test_a_run_moves_through_its_states_and_an_unknown_status_or_run_is_refused(backend: Backend) -> None:
    store, other = RunStore(await backend.db()), RunStore(await backend.db())
    await _run(store, "r1")
    with pytest.raises(StoreError, match="unknown run status 'finished'"):
        await store.update("r1", status="finished")
    assert (await other.get("r1")).status == "running"  # nothing written by the refusal
    await store.update("r1", usage={"input_tokens": 7}, cost_usd=0.25, stop="end_turn", error={"code": "x"})
    row = await other.get("r1")
    assert (row.usage, row.cost_usd, row.stop, row.error, row.ended_at) == ({"input_tokens": 7}, 0.25, "end_turn",
                                                                           {"code": "x"}, None)  # fmt: skip
    assert (await other.request_cancel("r1")).cancel_requested and await store.is_cancel_requested("r1")
    await store.update("r1", status="done")
    assert (await other.get("r1")).ended_at is not None
    await _run(store, "r4")
    await store.update("r4", status="failed")
    cancelled = await other.request_cancel("r4")  # a finished run has nothing to stop
    assert cancelled.status == "failed" and not await other.is_cancel_requested("r4")
    with pytest.raises(RunNotFound, match="no run with id 'r9'") as info:
        await other.request_cancel("r9")
    assert "pincer runs list" in (info.value.hint or "")


@pytest.mark.anyio
async def test_a_runs_messages_are_read_on_from_a_point_with_their_audit_record(backend: Backend) -> None:
    store = RunStore(await backend.db())
    await _run(store, "r2", session="agent")
    await _run(store, "r3")
    await store.append_messages("r2", [])  # a turn with nothing to say writes nothing
    await store.append_message("r2", 0, "user", {"content": "hi"})
    await store.append_messages(
        "r2", [(1, "assistant", {"content": "calling"}, None), (2, "tool", {"content": "ok"}, 42)]
    )
    assert [m.to_dict() for m in await store.messages("r2", after_seq=0)] == [
        {"seq": 1, "ts": pytest.approx(1, abs=1e10), "role": "assistant", "content": "calling"},
        {"seq": 2, "ts": pytest.approx(1, abs=1e10), "role": "tool", "content": "ok", "audit_id": 42},
    ]
    assert [r.id for r in await store.list(session="agent")] == ["r2"]
    assert {r.id for r in await store.list()} == {"r2", "r3"}
