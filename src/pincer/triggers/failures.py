"""Failed webhook deliveries per client address, for the 429 that stops signature guessing.

A sliding window: an address with ``limit`` failures (bad or missing signature or token, a
stale timestamp, an unknown hook) within ``window_s`` gets 429 for every delivery until the
oldest of them leaves the window; ``Retry-After`` says when. The refusals themselves are not
failures, so a sender that backs off is let in again. The table is bounded: past
``max_addresses`` the addresses whose window emptied are dropped, then the oldest.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["FailureWindow", "FAILURE_WINDOW_S", "MAX_TRACKED_ADDRESSES"]

FAILURE_WINDOW_S = 60.0
MAX_TRACKED_ADDRESSES = 4_096


class FailureWindow:
    """Used from the event loop thread only (the gateway's webhook route), so it takes no lock."""

    def __init__(
        self,
        *,
        limit: Callable[[], int],
        window_s: float = FAILURE_WINDOW_S,
        max_addresses: int = MAX_TRACKED_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._max = max_addresses
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> float | None:
        """Seconds until ``address`` may try again, or None when it may now."""
        times = self._failures.get(address)
        if not times:
            return None
        now = self._clock()
        while times and now - times[0] >= self._window_s:
            times.popleft()
        if len(times) < self._limit():
            return None
        return max(0.0, self._window_s - (now - times[len(times) - self._limit()]))

    def record(self, address: str) -> None:
        now = self._clock()
        times = self._failures.get(address)
        if times is None:
            if len(self._failures) >= self._max:
                self._evict(now)
            times = self._failures[address] = deque()
        else:
            self._failures.move_to_end(address)
        times.append(now)
        while len(times) > max(self._limit(), 1) * 2:
            times.popleft()

    def _evict(self, now: float) -> None:
        for address in [a for a, t in self._failures.items() if not t or now - t[-1] >= self._window_s]:
            del self._failures[address]
        while len(self._failures) >= self._max:
            self._failures.popitem(last=False)
