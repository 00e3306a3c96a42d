"""A run whose process died is reported failed (a real second process wrote it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pincer.store.runs import RunStore
from pincer.store.sql import open_sqlite


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
