"""Several processes opening one new home at once all succeed.

Two processes switching a new SQLite file to WAL at the same moment deadlock inside SQLite, which
answers one of them "database is locked" at once (no busy wait); a second `pincer` command
started beside the first on a fresh home failed that way about once in a few hundred starts
(found by the CLI approval tests, which start `pincer tools call` and `pincer approvals list`
together). store/open_lock.py makes the set-up of a file one process at a time.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import anyio

from pincer.secrets.store import SecretStore
from pincer.store.db import DB_FILENAME
from pincer.store.open_lock import open_lock
from pincer.store.sql import Sql, open_sqlite
from pincer.store.sql.migrate import prepare_sqlite

PROCESSES = 8
ROUNDS = 12
JOIN_S = 120.0


def _open_home(home: str, start: float) -> str:
    while time.time() < start:  # every process begins at the same instant
        pass
    try:
        anyio.run(_open_and_write, Path(home))
        SecretStore.open(Path(home), key=b"k" * 32).close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


async def _open_and_write(home: Path) -> None:
    db = await open_sqlite(home)
    try:
        await db.execute(Sql("INSERT INTO grants (id, created_at, body) VALUES (:id, 0, '{}')"), {"id": str(os.getpid())})
    finally:
        await db.aclose()


def test_processes_opening_a_new_home_at_once_all_get_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    failures: list[str] = []
    with context.Pool(PROCESSES) as pool:
        for n in range(ROUNDS):
            home = tmp_path / f"home-{n}"
            home.mkdir()
            start = time.time() + 0.3
            results = pool.starmap(_open_home, [(str(home), start)] * PROCESSES, chunksize=1)
            failures += [r for r in results if r != "ok"]
    assert failures == []
    conn = sqlite3.connect(tmp_path / "home-0" / DB_FILENAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT COUNT(*) FROM grants").fetchone()[0] == PROCESSES
    conn.close()


def test_an_open_waits_while_another_process_sets_the_file_up(tmp_path: Path) -> None:
    opened = threading.Event()
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            prepare_sqlite(tmp_path / DB_FILENAME)
        except BaseException as exc:
            errors.append(exc)
        opened.set()

    with open_lock(tmp_path / DB_FILENAME):
        thread = threading.Thread(target=open_it)
        thread.start()
        assert not opened.wait(0.5)  # it waits for the holder (flock locks are per open file)
    thread.join(JOIN_S)
    assert opened.is_set() and errors == []
    assert (tmp_path / f".{DB_FILENAME}.open-lock").stat().st_mode & 0o777 == 0o600
