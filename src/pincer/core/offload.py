"""Work that grows with a value runs off the event loop when the value is large.

    scanned, count = await off_loop(scanner.scan, output, over=output)

The leak scan, a JSON Schema check, canonical JSON and the size limit cost time in proportion
to the value they read: about 1-2 us a character for the scan of text that looks like an
encoding (``bench/scanner.py``), so a 5 MB tool output held the event loop, and with it every
other MCP and REST call of the gateway, for seconds. ``off_loop`` runs such work in a worker
thread when ``over`` holds more than ``LARGE_CHARS`` characters, and inline otherwise: a thread
hop costs 50-65 us (``store/sql/workers.py``), more than the whole scan of a small value, and
most calls carry a few hundred bytes (``bench/stall_large.py`` measures both sides).

The threads are bounded: ``LARGE_THREADS`` jobs at most run at once per event loop (one limiter
shared by every caller on the loop, the gateway's service included), and the rest queue, so many
large calls cannot take every thread of anyio's pool. A caller cancelled while its job runs
stops waiting at once and the result is dropped; the job keeps its place under the limit until
it ends (a thread cannot be stopped), so callers that cancel cannot start more threads than the
limit either. The work must be pure: it may run after its caller is gone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

__all__ = ["LARGE_CHARS", "LARGE_THREADS", "is_large", "off_loop", "off_loop_limiter"]

T = TypeVar("T")

# Measured (bench/stall_large.py, bench/scanner.py): the scan of 8 KiB costs 0.2 ms (source
# code) to 8 ms (text that looks like base64 or an encoding) on this 2-core machine, against a
# 50-65 us thread hop; below it a value's whole chain costs less than the hop, above it the
# stall grows past a few milliseconds.
LARGE_CHARS = 8 * 1024
# CPU-bound jobs: more threads than cores only share the GIL more finely.
LARGE_THREADS = 2

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("pincer_off_loop_limiter")


def is_large(value: Any, limit: int = LARGE_CHARS) -> bool:
    """Whether ``value`` (a JSON-like value: strings, bytes, mappings, lists, tuples) holds more
    than ``limit`` characters. Every string and key counts its length, every other item one, so
    the walk stops after at most ``limit`` items whatever the value's size, depth or cycles.

    Exact type checks first: this runs several times on every call, most of them small (a few
    microseconds a call matter on the chain's hot path; the ABC check costs more)."""
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value) > limit
    budget = limit
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            budget -= len(item) or 1
        elif kind is dict or (kind is not list and kind is not tuple and isinstance(item, Mapping)):
            budget -= 1 + len(item)
            if budget < 0:
                return True
            for key, child in item.items():
                if type(key) is str:
                    budget -= len(key)
                stack.append(child)
        elif kind is list or kind is tuple:
            budget -= 1 + len(item)
            if budget < 0:
                return True
            stack.extend(item)
        elif isinstance(item, str | bytes | bytearray):
            budget -= len(item) or 1
        elif isinstance(item, list | tuple):
            budget -= 1 + len(item)
            if budget < 0:
                return True
            stack.extend(item)
        else:
            budget -= 1
        if budget < 0:
            return True
    return False


def off_loop_limiter() -> anyio.CapacityLimiter:
    """The running event loop's limit on large jobs (one per loop, made on first use)."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(LARGE_THREADS)
        _LIMITER.set(limiter)
        return limiter


async def off_loop(
    func: Callable[..., T], *args: Any, over: Any = None, large: bool | None = None, shield: bool = False
) -> T:
    """``func(*args)``: inline when ``over`` is small (``is_large``), else in a worker thread
    under the loop's limit. Exceptions pass through unchanged either way. ``large``: the verdict
    when the caller measured ``over`` already (a call's arguments, read by several steps).
    ``shield``: a caller cancelled meanwhile still waits for the result (what must be recorded
    whatever happens)."""
    if not (is_large(over) if large is None else large):
        return func(*args)
    if shield:
        with anyio.CancelScope(shield=True):
            result = await _in_thread(func, args)
        return result  # noqa: RET504  (a return inside the scope: mypy sees a scope that may swallow)
    return await _in_thread(func, args)


async def _in_thread(func: Callable[..., T], args: tuple[Any, ...]) -> T:
    limiter = off_loop_limiter()
    job: _Job[T] = _Job(func, args, limiter)
    await limiter.acquire_on_behalf_of(job)
    try:
        result = await anyio.to_thread.run_sync(job.run, abandon_on_cancel=True)
    except BaseException:
        job.abandon()
        raise
    job.give_back()
    return result


class _Left(Exception):
    """Raised (to nobody) by a job whose caller left before it began."""


class _Job(Generic[T]):
    """One job under the limit: its token goes back when the work has ended or will never start,
    never while a thread still runs it."""

    def __init__(self, func: Callable[..., T], args: tuple[Any, ...], limiter: anyio.CapacityLimiter) -> None:
        self._func = func
        self._args = args
        self._limiter = limiter
        self._lock = threading.Lock()
        self._state = "queued"  # -> running -> ended; or -> abandoned (before it ran) / left (while it ran)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another event loop than asyncio's: a left job's token goes back at once
            self._loop = None

    def run(self) -> T:
        with self._lock:
            if self._state != "queued":
                raise _Left  # nobody waits for it: its caller left before it began
            self._state = "running"
        try:
            return self._func(*self._args)
        finally:
            with self._lock:
                left = self._state == "left"
                self._state = "ended"
            if left and self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self._limiter.release_on_behalf_of, self)
                except RuntimeError:  # the loop is closed: its limiter is gone with it
                    pass

    def abandon(self) -> None:
        """The caller stops waiting (cancelled, or the job raised)."""
        with self._lock:
            running = self._state == "running" and self._loop is not None
            self._state = "left" if running else "abandoned"
        if not running:
            self._limiter.release_on_behalf_of(self)

    def give_back(self) -> None:
        with self._lock:
            self._state = "ended"
        self._limiter.release_on_behalf_of(self)
