"""Per-tool rate limits: calls per minute and per hour over sliding windows.

The windows are kept in memory and seeded from the audit log the first time a tool is seen, so
separate processes (one CLI call after another) still count each other's calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pincer.core.errors import BudgetExceeded

__all__ = ["RateLimit", "RateLimiter", "MINUTE_S", "HOUR_S"]

MINUTE_S = 60.0
HOUR_S = 3600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    calls_per_minute: int | None = None
    calls_per_hour: int | None = None

    @property
    def is_unlimited(self) -> bool:
        return self.calls_per_minute is None and self.calls_per_hour is None


class RateLimiter:
    def __init__(self, seed: Callable[[str, float], list[float]] | None = None) -> None:
        self._windows: dict[str, deque[float]] = {}
        self._seed = seed

    def knows(self, tool: str) -> bool:
        """Whether ``tool`` has its window already (else :meth:`seed` it first, or it starts empty)."""
        return tool in self._windows

    def seed(self, tool: str, timestamps: list[float]) -> None:
        """Start ``tool``'s window with the times of its calls in the last hour (read from the
        audit log: the calls other processes made count too)."""
        self._windows.setdefault(tool, deque(timestamps))

    def reserve(self, tool: str, limit: RateLimit, now: float) -> None:
        """Count one call now, or raise BudgetExceeded with the time until a slot frees."""
        if limit.is_unlimited:
            return
        window = self._windows.get(tool)
        if window is None:
            window = deque(self._seed(tool, now - HOUR_S) if self._seed else ())
            self._windows[tool] = window
        while window and window[0] <= now - HOUR_S:
            window.popleft()
        if limit.calls_per_hour is not None and len(window) >= limit.calls_per_hour:
            retry = window[len(window) - limit.calls_per_hour] + HOUR_S - now
            raise BudgetExceeded(
                f"{tool} reached its limit of {limit.calls_per_hour} calls per hour",
                retry_after_s=max(retry, 0.0),
            )
        if limit.calls_per_minute is not None:
            recent = 0
            for ts in reversed(window):
                if ts <= now - MINUTE_S:
                    break
                recent += 1
            if recent >= limit.calls_per_minute:
                oldest_counted = window[len(window) - limit.calls_per_minute]
                raise BudgetExceeded(
                    f"{tool} reached its limit of {limit.calls_per_minute} calls per minute",
                    retry_after_s=max(oldest_counted + MINUTE_S - now, 0.0),
                )
        window.append(now)
