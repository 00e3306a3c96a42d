"""Rate limits shared by every gateway: sliding windows in Redis, checked and counted atomically.

``[cache] url = "redis://..."`` replaces the in-process windows of policy/budget.py (which each
gateway would keep on its own, so three gateways would let three times the limit through). One
Lua script per call trims the tool's window, counts the last hour and the last minute, and either
records the call or answers how long until a slot frees: Redis runs a script alone, so no two
gateways can both take the last slot. The windows hold only what Redis saw: a limit starts
counting when the cache does (the audit log still has every call).

When Redis cannot be reached the call is refused (StoreError): a limit that cannot be checked
is not granted.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from pincer.core.errors import BudgetExceeded, StoreError
from pincer.core.extras import require
from pincer.policy.budget import HOUR_S, MINUTE_S, RateLimit
from pincer.store.sql.postgres import redact_url

logger = logging.getLogger(__name__)

__all__ = ["SharedRateLimiter", "CACHE_TIMEOUT_S", "KEY_PREFIX"]

CACHE_TIMEOUT_S = 5.0
KEY_PREFIX = "pincer:"

# KEYS[1] the tool's window (a sorted set of call times); ARGV: now, per minute (0: none),
# per hour (0: none), a unique member, the minute and the hour in seconds. Returns {1} when
# counted, {0, retry_after_s, which window}.
_RESERVE = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
local per_minute = tonumber(ARGV[2])
local per_hour = tonumber(ARGV[3])
local minute = tonumber(ARGV[5])
local hour = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - hour)
if per_hour > 0 then
  local in_hour = redis.call('ZCARD', key)
  if in_hour >= per_hour then
    local oldest = redis.call('ZRANGE', key, in_hour - per_hour, in_hour - per_hour, 'WITHSCORES')
    return {0, tostring(tonumber(oldest[2]) + hour - now), 'hour'}
  end
end
if per_minute > 0 then
  local in_minute = redis.call('ZCOUNT', key, '(' .. (now - minute), '+inf')
  if in_minute >= per_minute then
    local oldest = redis.call('ZRANGEBYSCORE', key, '(' .. (now - minute), '+inf', 'WITHSCORES', 'LIMIT', in_minute - per_minute, 1)
    return {0, tostring(tonumber(oldest[2]) + minute - now), 'minute'}
  end
end
redis.call('ZADD', key, now, ARGV[4])
redis.call('EXPIRE', key, math.ceil(hour) + 1)
return {1}
"""


class SharedRateLimiter:
    """The per-tool limits of ``[limits]``, counted in Redis across every gateway."""

    def __init__(self, url: str, *, prefix: str = KEY_PREFIX) -> None:
        redis_asyncio = require("redis", "redis.asyncio")

        self._url = url
        self._prefix = prefix
        self._client: Any = redis_asyncio.Redis.from_url(
            url, socket_timeout=CACHE_TIMEOUT_S, socket_connect_timeout=CACHE_TIMEOUT_S
        )
        self._script: Any = self._client.register_script(_RESERVE)

    async def reserve(self, tool: str, limit: RateLimit, now: float) -> None:
        """Count one call now, or raise BudgetExceeded with the time until a slot frees."""
        if limit.is_unlimited:
            return
        redis = require("redis")

        member = f"{now:.6f}:{secrets.token_hex(6)}"
        try:
            answer = await self._script(
                keys=[f"{self._prefix}rate:{tool}"],
                args=[repr(now), limit.calls_per_minute or 0, limit.calls_per_hour or 0, member, MINUTE_S, HOUR_S],
            )
        except redis.RedisError as exc:
            raise StoreError(
                f"cannot reach the shared cache {redact_url(self._url)} to check {tool}'s rate limit: "
                f"{type(exc).__name__}",
                hint="check [cache] url in config.toml and that Redis runs; calls with a limit wait for it",
            ) from None
        if int(answer[0]) == 1:
            return
        retry, window = float(answer[1]), answer[2].decode() if isinstance(answer[2], bytes) else str(answer[2])
        count = limit.calls_per_hour if window == "hour" else limit.calls_per_minute
        raise BudgetExceeded(
            f"{tool} reached its limit of {count} calls per {window} (counted across every gateway)",
            retry_after_s=max(retry, 0.0),
        )

    async def count(self, tool: str, now: float, window_s: float = HOUR_S) -> int:
        """How many calls of ``tool`` the window holds since ``now - window_s``."""
        return int(await self._client.zcount(f"{self._prefix}rate:{tool}", f"({now - window_s}", "+inf"))

    async def ping(self) -> bool:
        """Whether Redis answers now (``GET /readyz``)."""
        redis = require("redis")
        try:
            return bool(await self._client.ping())
        except redis.RedisError:
            return False

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._client.connection_pool.disconnect()

