"""A :class:`~pincer.triggers.requests.RunStarter` that runs nothing: it records what it was asked
to run and ends each run as told. The trigger engine's stand-in for the agent loop in tests and
benchmarks (``bench/hooks.py`` through ``serve_recording.py``); kept out of the wheel, since no
command uses it.

With ``path`` every accepted request is also written to a SQLite file of its own (one row per
run id, written before ``start`` returns), so a test can count runs across a killed and
restarted ``pincer serve``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from pincer.triggers.requests import RunOutcome, RunRequest, RunStatus

__all__ = ["RecordingStarter", "recorded_runs"]

Decide = Callable[[RunRequest], RunOutcome | Awaitable[RunOutcome] | None]


class RecordingStarter:
    """``decide(request)`` gives each run's outcome (None: the run stays open until
    :meth:`finish`); without it every run ends ``done`` at once. ``hold=True`` keeps every run
    open until :meth:`finish`."""

    def __init__(
        self, *, decide: Decide | None = None, hold: bool = False, path: Path | None = None, start_delay_s: float = 0.0
    ) -> None:
        self.requests: list[RunRequest] = []
        self.duplicates = 0  # start() calls for a run id started before (by this or an earlier process)
        self._start_delay_s = start_delay_s
        self.started: dict[str, RunRequest] = {}
        self._decide = decide
        self._hold = hold
        self._outcomes: dict[str, RunOutcome] = {}
        self._ended: dict[str, anyio.Event] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a commit survives the process being killed (what the tests do), without an
            # fsync per run that would make the stand-in slower than what it stands in for.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, request TEXT NOT NULL)")

    async def start(self, request: RunRequest) -> str:
        if request.run_id in self.started:
            self.duplicates += 1
            return request.run_id
        if self._start_delay_s:
            await anyio.sleep(self._start_delay_s)
        if self._db is not None:
            added = self._db.execute(
                "INSERT OR IGNORE INTO runs (run_id, request) VALUES (?, ?)",
                (request.run_id, json.dumps(request.to_dict())),
            ).rowcount
            if not added:  # started by an earlier process: the contract is to start nothing
                self.duplicates += 1
                self.started[request.run_id] = request
                self.finish(request.run_id)
                return request.run_id
        self.started[request.run_id] = request
        self.requests.append(request)
        self._ended[request.run_id] = anyio.Event()
        if not self._hold:
            decided = self._decide(request) if self._decide is not None else RunOutcome(
                run_id=request.run_id, status=RunStatus.DONE
            )
            if decided is not None and not isinstance(decided, RunOutcome):
                decided = await decided
            if decided is not None:
                self.finish(request.run_id, decided.status, decided.error)
        return request.run_id

    def finish(self, run_id: str, status: RunStatus | str = RunStatus.DONE, error: str | None = None) -> None:
        self._outcomes[run_id] = RunOutcome(run_id=run_id, status=RunStatus(status), error=error)
        event = self._ended.setdefault(run_id, anyio.Event())
        event.set()

    async def is_running(self, run_id: str) -> bool:
        return run_id in self.started and run_id not in self._outcomes

    async def wait(self, run_id: str) -> RunOutcome:
        event = self._ended.get(run_id)
        if event is None:
            return RunOutcome(run_id=run_id, status=RunStatus.LOST, error="this starter never started it")
        await event.wait()
        return self._outcomes[run_id]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def recorded_runs(path: Path) -> list[RunRequest]:
    """The requests a ``RecordingStarter(path=...)`` recorded, in no particular order."""
    db = sqlite3.connect(path, timeout=10)
    try:
        rows = db.execute("SELECT request FROM runs").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()
    return [RunRequest.from_dict(json.loads(row[0])) for row in rows]
