"""Rate limits shared through a real Redis (tests/backends.py): exact across gateways."""

from __future__ import annotations

import secrets
import socket

import anyio
import pytest

from pincer.core.errors import BudgetExceeded, StoreError
from pincer.policy.budget import RateLimit
from pincer.store.cache import SharedRateLimiter
from tests.backends import redis_server

pytestmark = pytest.mark.anyio


async def test_two_gateways_together_let_exactly_the_limit_through() -> None:
    url, prefix = redis_server().url(), f"t{secrets.token_hex(4)}:"
    gateways = [SharedRateLimiter(url, prefix=prefix), SharedRateLimiter(url, prefix=prefix)]
    limit = RateLimit(calls_per_minute=7)
    granted: list[int] = []
    refused: list[tuple[float, str]] = []

    async def call(i: int) -> None:
        try:
            await gateways[i % 2].reserve("send", limit, 1_000.0 + i * 0.001)
            granted.append(i)
        except BudgetExceeded as exc:
            refused.append((exc.retry_after_s, exc.message))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(call, i)
    assert len(granted) == 7 and len(refused) == 33
    # The calls' clocks are 1 ms apart and they reach Redis in any order: a call whose clock is
    # earlier than that of one granted before it waits up to 60 s plus that difference.
    spread = 40 * 0.001
    assert all(0 < retry <= 60 + spread and "per minute" in message for retry, message in refused), refused[:3]
    # A minute later the window has room again; other tools never shared it.
    await gateways[0].reserve("send", limit, 1_061.0)
    await gateways[1].reserve("other", limit, 1_000.0)
    assert await gateways[0].count("send", 1_061.0) == 8
    for gateway in gateways:
        await gateway.aclose()


async def test_the_hour_window_counts_across_minutes() -> None:
    url, prefix = redis_server().url(), f"t{secrets.token_hex(4)}:"
    limiter = SharedRateLimiter(url, prefix=prefix)
    limit = RateLimit(calls_per_minute=10, calls_per_hour=3)
    for minute in range(3):
        await limiter.reserve("send", limit, 5_000.0 + minute * 60)
    with pytest.raises(BudgetExceeded, match="3 calls per hour") as info:
        await limiter.reserve("send", limit, 5_200.0)
    assert info.value.retry_after_s == pytest.approx(3_400.0)
    await limiter.reserve("send", limit, 8_601.0)  # the first call left the hour
    await limiter.aclose()


async def test_an_unreachable_cache_refuses_the_call_and_hides_the_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    limiter = SharedRateLimiter(f"redis://user:hunter2-secret@127.0.0.1:{port}/0")
    with pytest.raises(StoreError) as info:
        await limiter.reserve("send", RateLimit(calls_per_minute=1), 1.0)
    assert "hunter2-secret" not in str(info.value) and "***" in info.value.message
    assert "[cache] url" in (info.value.hint or "")
    await limiter.aclose()
