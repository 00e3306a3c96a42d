from __future__ import annotations

import pytest

from pincer.core.errors import BudgetExceeded
from pincer.policy.budget import RateLimit, RateLimiter


def test_per_minute_limit_reports_time_to_retry() -> None:
    limiter = RateLimiter()
    limit = RateLimit(calls_per_minute=2)
    limiter.reserve("t", limit, now=1000.0)
    limiter.reserve("t", limit, now=1010.0)
    with pytest.raises(BudgetExceeded) as info:
        limiter.reserve("t", limit, now=1020.0)
    assert info.value.retry_after_s == pytest.approx(40.0)
    assert "per minute" in info.value.message and "retry in 40 s" in str(info.value)
    limiter.reserve("t", limit, now=1061.0)  # the first call left the window


def test_per_hour_limit() -> None:
    limiter = RateLimiter()
    limit = RateLimit(calls_per_hour=3)
    for t in (0.0, 100.0, 200.0):
        limiter.reserve("t", limit, now=t)
    with pytest.raises(BudgetExceeded) as info:
        limiter.reserve("t", limit, now=300.0)
    assert info.value.retry_after_s == pytest.approx(3300.0)


def test_windows_are_seeded_from_history() -> None:
    limiter = RateLimiter(seed=lambda tool, since: [995.0, 996.0])
    with pytest.raises(BudgetExceeded):
        limiter.reserve("t", RateLimit(calls_per_minute=2), now=1000.0)


def test_unlimited_and_per_tool() -> None:
    limiter = RateLimiter()
    for _ in range(1000):
        limiter.reserve("a", RateLimit(), now=0.0)
    limiter.reserve("b", RateLimit(calls_per_minute=1), now=0.0)
    limiter.reserve("c", RateLimit(calls_per_minute=1), now=0.0)
