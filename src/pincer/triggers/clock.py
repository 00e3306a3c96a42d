"""The scheduler's sense of time: the system clock, or a manual one that tests move by hand.

Wall time (seconds since the epoch) decides when a job is due; the manual clock lets a test
stand at 01:59:59 on the night of a DST change and step over it without waiting an hour.
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio
import anyio.lowlevel

__all__ = ["Clock", "SystemClock", "ManualClock"]


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds))


class ManualClock:
    """Time stands still until :meth:`set` or :meth:`advance` moves it; a sleeper wakes once the
    time it waits for has come (or at once when ``seconds`` is 0)."""

    def __init__(self, start: float) -> None:
        self._now = float(start)
        self._moved = anyio.Event()

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"a manual clock does not go back ({t} < {self._now})")
        self._now = float(t)
        self._moved.set()
        self._moved = anyio.Event()

    def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)

    async def sleep(self, seconds: float) -> None:
        until = self._now + max(0.0, seconds)
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        while self._now < until:
            await self._moved.wait()
