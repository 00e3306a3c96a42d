"""A call's result never reaches its caller before its audit record is committed, also when
records of concurrent calls are committed together (group commit) — issue 23 item 2.

Two proofs through the whole chain (``Pincer.call``): at the instant each of 64 concurrent
results returns, another connection already reads its record; and a process killed with SIGKILL
in the middle of a stream of concurrent calls has on disk every record whose result it printed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
from pincer.service import Pincer
from pincer.store import AuditLog
from pincer.store.sql import Sql, open_sqlite
from pincer.store.sql.sqlite import SqliteDatabase
from tests.funcruntime import FuncRuntime

CALLERS = 64
CALLS_PER_CALLER = 8
KILL_AFTER_RESULTS = 300
CHILD_TIMEOUT_S = 120.0


def _record_hash(conn: sqlite3.Connection, record_id: int) -> str | None:
    row = conn.execute("SELECT hash FROM audit WHERE id = ?", (record_id,)).fetchone()
    return row[0] if row else None


@pytest.mark.anyio
@pytest.mark.parametrize("synchronous", ["normal", "full"])
async def test_every_concurrent_result_returns_after_its_record_is_committed(tmp_path: Path, synchronous: str) -> None:
    config = parse_config(f'[audit]\nsynchronous = "{synchronous}"\n', home=tmp_path)
    runtime = FuncRuntime()

    async def echo(args: dict[str, object], host: object) -> object:
        return args.get("text", "")

    runtime.add("echo", echo)
    # Another process's view: a connection of its own, which reads only committed transactions.
    reader = sqlite3.connect(tmp_path / "pincer.db")
    seen: list[int] = []
    missing: list[int] = []
    async with Pincer.open(tmp_path, config=config, secret_key=b"k" * 32, builtins=False, scripts=False, wasm=False) as pincer:
        await pincer.add_runtime(runtime)
        begins: list[str] = []
        assert isinstance(pincer.db, SqliteDatabase)
        await pincer.db.trace(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)

        async def caller(i: int) -> None:
            for j in range(CALLS_PER_CALLER):
                result = await pincer.call(CallRequest(tool="echo", args={"text": f"{i}-{j}"}))
                # No await between the return and this read: the record is there, or it never was.
                assert result.audit_id is not None
                (seen if _record_hash(reader, result.audit_id) is not None else missing).append(result.audit_id)

        async with anyio.create_task_group() as group:
            for i in range(CALLERS):
                group.start_soon(caller, i)
        await pincer.db.trace(None)
        records = reader.execute("SELECT COUNT(*) FROM audit").fetchone()[0]
        assert await pincer.audit.verify() == CALLERS * CALLS_PER_CALLER
    reader.close()
    assert not missing, f"{len(missing)} results returned before their record was committed: {missing[:5]}"
    assert sorted(seen) == list(range(1, CALLERS * CALLS_PER_CALLER + 1))
    assert records == CALLERS * CALLS_PER_CALLER
    assert len(begins) < CALLERS * CALLS_PER_CALLER / 4, "concurrent calls should share transactions"


_CHILD = """
import sys
from pathlib import Path
import anyio
from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime

home = Path(sys.argv[1])

async def main():
    config = parse_config('[audit]\\nsynchronous = "' + sys.argv[2] + '"\\n', home=home)
    runtime = FuncRuntime()
    async def echo(args, host):
        return "ok"
    runtime.add("echo", echo)
    async with Pincer.open(home, config=config, secret_key=b"k" * 32, builtins=False, scripts=False, wasm=False) as pincer:
        await pincer.add_runtime(runtime)
        async def caller():
            while True:
                result = await pincer.call(CallRequest(tool="echo", args={}))
                sys.stdout.write(f"{result.audit_id}\\n")
                sys.stdout.flush()
        async with anyio.create_task_group() as group:
            for _ in range(64):
                group.start_soon(caller)

anyio.run(main)
"""


@pytest.mark.anyio
@pytest.mark.parametrize("synchronous", ["normal", "full"])
async def test_a_killed_process_kept_every_record_whose_result_it_returned(tmp_path: Path, synchronous: str) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), synchronous], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    returned: list[int] = []
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    try:
        assert child.stdout is not None
        while len(returned) < KILL_AFTER_RESULTS and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            returned.append(int(line))
    finally:
        child.send_signal(signal.SIGKILL)  # no shutdown, no flush, no checkpoint: what the disk holds
        child.wait(timeout=CHILD_TIMEOUT_S)
        stderr = child.stderr.read().decode() if child.stderr else ""
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert len(returned) == KILL_AFTER_RESULTS, stderr
    db = await open_sqlite(tmp_path)
    try:
        kept = {row[0] for row in await db.fetch_all(Sql("SELECT id FROM audit"))}
        log = await AuditLog.open(db, key=load_or_create_key(tmp_path, None, place=AUDIT_KEY))
        assert await log.verify() == len(kept)  # whatever was in flight at the kill left no torn record
    finally:
        await db.aclose()
    lost = sorted(set(returned) - kept)
    assert not lost, f"results returned for records the killed process never committed: {lost[:5]}"
