"""Threads that own a database connection: the event loop hands them jobs and awaits the answer.

sqlite3 blocks, so no sqlite3 call runs on the event loop: each connection is opened, used and
closed by one thread of its own, which runs the jobs put on its queue one at a time, in order.
The answer comes back through the loop's own thread-safe wake-up (``call_soon_threadsafe``):
measured here at 8-15 us a hop, where ``anyio.to_thread.run_sync`` (a thread pool, a limiter
and a cancel scope per call) costs 50-65 us, so a dedicated thread is what keeps an audit
commit cheap. On an event loop other than asyncio's the hop falls back to waiting in anyio's
thread pool: correct, only slower.

A cancelled caller stops waiting; its job still runs to the end (a statement cannot be taken
back half-way), and its answer is dropped.

A worker of one thread may also be given a *tick* (:meth:`Worker.tick_every`): a job of its own
that its thread runs every so often, between the queued jobs or while it waits for one; the
SQLite writer follows other processes' commits with one (store/sql/sqlite.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio.to_thread

from pincer.core.errors import StoreError

logger = logging.getLogger(__name__)

__all__ = ["Worker"]

C = TypeVar("C")
T = TypeVar("T")
_STOP = None


class _Reply:
    """Where a job's answer goes: an asyncio future on its loop, or a concurrent future."""

    __slots__ = ("_loop", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop | None, future: Any) -> None:
        self._loop = loop
        self._future = future

    def send(self, result: Any, error: BaseException | None) -> None:
        if self._loop is None:
            if error is not None:
                self._future.set_exception(error)
            else:
                self._future.set_result(result)
            return
        try:
            self._loop.call_soon_threadsafe(_settle, self._future, result, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class Worker(Generic[C]):
    """``threads`` threads taking jobs from one queue, each on a connection of its own made by
    ``connect`` in that thread (and closed by ``close`` there when the worker stops)."""

    def __init__(self, name: str, connect: Callable[[], C], close: Callable[[C], None], *, threads: int = 1) -> None:
        self._name = name
        self._connect = connect
        self._close = close
        self._jobs: queue.SimpleQueue[tuple[Callable[[Any], Any], _Reply] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._count = threads
        self._lock = threading.Lock()
        self._stopped = False
        # (interval in seconds, the job): read by the thread before each wait for a job
        self._tick: tuple[float, Callable[[Any], object]] | None = None

    def _start(self) -> None:
        with self._lock:
            if self._threads or self._stopped:
                return
            for index in range(self._count):
                thread = threading.Thread(target=self._serve, name=f"{self._name}-{index}", daemon=True)
                thread.start()
                self._threads.append(thread)

    async def run(self, job: Callable[[C], T]) -> T:
        """Run ``job(connection)`` on one of the worker's threads; its answer or its exception."""
        if not self._threads:
            self._start()
        if self._stopped:
            raise StoreError(f"the database ({self._name}) is closed", hint="a programming error: open it again")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            future: asyncio.Future[T] = loop.create_future()
            self._jobs.put((job, _Reply(loop, future)))
            return await future
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((job, _Reply(None, done)))
        return await anyio.to_thread.run_sync(done.result)

    def tick_every(self, interval_s: float, tick: Callable[[C], object] | None) -> None:
        """From the next job on, run ``tick(connection)`` on the worker's thread at least every
        ``interval_s`` (None: no more). Called from the thread itself (a job), so it takes hold
        at once; a tick that raises is logged and runs again at its next time."""
        assert self._count == 1, "a tick belongs to a worker of one thread"
        self._tick = None if tick is None else (interval_s, tick)

    def _serve(self) -> None:
        connection: Any = None
        failure: BaseException | None = None
        try:
            connection = self._connect()
        except BaseException as exc:  # noqa: BLE001 - answered to every job, below
            failure = exc
        due = 0.0
        try:
            while True:
                tick = self._tick if failure is None else None
                if tick is None:
                    item = self._jobs.get()
                else:
                    interval, run_tick = tick
                    now = time.monotonic()
                    if now >= due:
                        due = now + interval
                        try:
                            run_tick(connection)
                        except Exception:  # a tick is a look: the next one looks again
                            logger.exception("%s: a periodic job failed", self._name)
                    try:
                        item = self._jobs.get(timeout=max(0.0, due - time.monotonic()))
                    except queue.Empty:
                        continue
                if item is _STOP:
                    return
                job, reply = item
                if failure is not None:
                    reply.send(None, failure)
                    continue
                try:
                    result = job(connection)
                except BaseException as exc:  # noqa: BLE001 - the caller's to handle
                    reply.send(None, exc)
                else:
                    reply.send(result, None)
        finally:
            if connection is not None:
                try:
                    self._close(connection)
                except Exception as exc:  # noqa: BLE001 - closing: nothing waits on it
                    logger.debug("closing a %s connection failed: %s", self._name, exc)

    async def aclose(self) -> None:
        """Let every queued job finish, then stop the threads (their connections close)."""
        with self._lock:
            self._stopped = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(_STOP)

        def join() -> None:
            for thread in threads:
                thread.join()

        if threads:
            await anyio.to_thread.run_sync(join)
