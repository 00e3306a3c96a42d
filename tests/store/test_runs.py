"""The runs table: rows, transcripts, cancel requests, and runs whose process died."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pincer.core.errors import RunNotFound
from pincer.store.db import open_database
from pincer.store.runs import RunStore


def _create(store: RunStore, run_id: str = "r1") -> None:
    store.create(run_id=run_id, skill="s", params={"p": 1}, message="m", trigger="cli", session="main", provider="openai", model="x")


def test_a_run_row_and_its_transcript_round_trip(tmp_path: Path) -> None:
    store = RunStore(open_database(tmp_path))
    _create(store)
    store.append_message("r1", 0, "system", {"content": "rules"})
    store.append_message("r1", 1, "tool", {"content": "ok", "tool_call_id": "c"}, audit_id=7)
    store.update("r1", usage={"input_tokens": 3}, cost_usd=0.1, status="done", stop="end")
    row = store.get("r1")
    assert (row.status, row.stop, row.usage, row.cost_usd) == ("done", "end", {"input_tokens": 3}, 0.1)
    assert row.ended_at is not None and row.to_dict()["params"] == {"p": 1}
    assert [m.to_dict()["audit_id"] for m in store.messages("r1") if m.role == "tool"] == [7]
    assert [r.id for r in store.list()] == ["r1"] and store.list(session="other") == []
    with pytest.raises(RunNotFound):
        store.get("nope")


def test_a_cancel_request_is_seen_by_the_run_and_ignored_once_it_ended(tmp_path: Path) -> None:
    store = RunStore(open_database(tmp_path))
    _create(store)
    assert store.request_cancel("r1").cancel_requested and store.is_cancel_requested("r1")
    _create(store, "r2")
    store.update("r2", status="done")
    assert not store.request_cancel("r2").cancel_requested


def test_a_running_run_whose_process_died_is_reported_failed(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from pincer.store.db import open_database; from pincer.store.runs import RunStore;"
        f"s = RunStore(open_database(Path({str(tmp_path)!r}))); "
        "s.create(run_id='gone', skill=None, params={}, message=None, trigger='cli', session='main', provider='openai', model='x')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    store = RunStore(open_database(tmp_path))
    row = store.get("gone")
    assert row.status == "failed" and row.error["code"] == "run_orphaned"
    assert store.list()[0].status == "failed"
