"""Requests refused before anyone was authenticated: counted and logged, never audited.

Any web page can make a browser POST to ``127.0.0.1`` (no token, a foreign Origin), and any
local process can send requests with no token at all. Were each refusal a hash-chained audit
record, anyone could fill the log and its disk for free and bury the records that matter. So a
refusal for a missing or wrong token, or for a foreign Host or Origin when no valid token came
with it, only moves a counter (``GET /api/v1/metrics``) and is logged at WARNING: at most one
line per client address per ``REFUSAL_LOG_INTERVAL_S``, the next line saying how many were not
logged in between. A request with a valid token that is refused all the same (foreign Origin,
body too large) is an authenticated call and stays in the audit log.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["UnauthenticatedRefusals", "REFUSAL_LOG_INTERVAL_S", "MAX_TRACKED_ADDRESSES"]

logger = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 10.0
# Addresses with a log window of their own; past it (many addresses at once) the stale windows
# are dropped, and then new addresses share one window so the table cannot grow without bound.
MAX_TRACKED_ADDRESSES = 4_096
_SHARED_WINDOW = "(other addresses)"
_MAX_PATH_CHARS = 200


class UnauthenticatedRefusals:
    """The counters and the rate-limited log of refusals made before authentication.

    Used from the event loop thread only (the gateway's guard), so it needs no lock.
    """

    def __init__(
        self,
        *,
        log_interval_s: float = REFUSAL_LOG_INTERVAL_S,
        max_addresses: int = MAX_TRACKED_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval_s = log_interval_s
        self._max_addresses = max_addresses
        self._clock = clock
        self._by_code: Counter[str] = Counter()
        # address -> [when its last line was logged, refusals not logged since]
        self._windows: dict[str, list[float]] = {}

    def record(self, *, address: str, method: str, path: str, code: str) -> None:
        self._by_code[code] += 1
        now = self._clock()
        key = self._window_key(address, now)
        window = self._windows.get(key)
        if window is not None and now - window[0] < self._interval_s:
            window[1] += 1
            return
        suppressed = int(window[1]) if window is not None else 0
        self._windows[key] = [now, 0]
        more = (
            f"; {suppressed} more from there in the last {self._interval_s:g} s were not logged" if suppressed else ""
        )
        # The path is the client's text: repr() keeps a newline in it from forging a log line.
        logger.warning(
            "refused %s %r from %s before authentication: %s%s",
            method, path[:_MAX_PATH_CHARS], address, code, more,
        )  # fmt: skip

    def _window_key(self, address: str, now: float) -> str:
        if address in self._windows or len(self._windows) < self._max_addresses:
            return address
        stale = [a for a, (logged_at, _) in self._windows.items() if now - logged_at >= self._interval_s]
        for old in stale:
            if old != _SHARED_WINDOW:
                del self._windows[old]
        return address if len(self._windows) < self._max_addresses else _SHARED_WINDOW

    def snapshot(self) -> dict[str, Any]:
        return {"total": sum(self._by_code.values()), "by_code": dict(sorted(self._by_code.items()))}
