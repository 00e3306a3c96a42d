"""GitHub's REST conventions over :class:`~pincer.builtins.api.ApiClient`: its headers, its
errors, its pagination (``Link`` header) and its rate limits.

* primary rate limit: 403/429 with ``x-ratelimit-remaining: 0``: :class:`ApiRateLimited` naming
  the reset time from ``x-ratelimit-reset``, never a retry;
* secondary rate limit: 403/429 with ``retry-after``: waited once (at most
  :data:`MAX_RETRY_AFTER_S`), then retried once; a second refusal is the error.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any

import anyio

from pincer.builtins.api import ApiClient, error_message, json_body
from pincer.core.errors import ApiRateLimited, ToolError

__all__ = ["GitHubApi", "GITHUB_HEADERS", "MAX_RETRY_AFTER_S"]

logger = logging.getLogger(__name__)

GITHUB_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
MAX_RETRY_AFTER_S = 60.0  # a secondary limit asking for longer is reported, not waited out
_NEXT = re.compile(r'<[^>]*[?&]page=(\d+)[^>]*>;\s*rel="next"')


class GitHubApi:
    def __init__(self, client: ApiClient) -> None:
        self.client = client

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        ok: tuple[int, ...] = (200, 201, 202),
    ) -> tuple[Any, str | None]:
        """The decoded JSON body and the next page number from ``Link`` (None on the last page)."""
        response = await self.client.request(method, path, query=query, json=json)
        if _is_secondary_limit(response):
            wait = _retry_after(response)
            if wait is not None and wait <= MAX_RETRY_AFTER_S:
                logger.info("github: secondary rate limit, retrying once after %.0f s", wait)
                await anyio.sleep(wait)
                response = await self.client.request(method, path, query=query, json=json)
        if response.status in ok or (204 in ok and response.status == 204):
            next_page = None
            link = response.header("link")
            if link and (match := _NEXT.search(link)):
                next_page = match.group(1)
            return (json_body(response, "github") if response.status != 204 else None), next_page
        raise _error(method, path, response)


def _is_secondary_limit(response: Any) -> bool:
    return response.status in (403, 429) and response.header("retry-after") is not None


def _retry_after(response: Any) -> float | None:
    try:
        return max(0.0, float(response.header("retry-after") or ""))
    except ValueError:
        return None


def _error(method: str, path: str, response: Any) -> Exception:
    message = error_message(response)
    where = f"{method} {path.split('?', 1)[0]}"
    if response.status in (403, 429) and response.header("x-ratelimit-remaining") == "0":
        reset = response.header("x-ratelimit-reset")
        when = "later"
        try:
            when = dt.datetime.fromtimestamp(int(reset or ""), tz=dt.UTC).isoformat().replace("+00:00", "Z")
        except (ValueError, OverflowError, OSError):
            pass
        limit = response.header("x-ratelimit-limit") or "?"
        return ApiRateLimited(
            f"github: rate limit of {limit} requests spent ({where}); it resets at {when}",
            hint=f"wait until {when}, or set a token with more quota: `pincer auth setup github`",
        )
    if response.status in (403, 429) and response.header("retry-after") is not None:
        return ApiRateLimited(
            f"github: secondary rate limit ({where}); GitHub asks to wait {response.header('retry-after')} s",
            hint="slow down: fewer calls in a row, then retry",
        )
    if response.status == 401:
        return ToolError(
            f"github: the token was refused (401: {message})",
            hint="set a valid token with `pincer auth setup github`",
        )
    if response.status == 404:
        return ToolError(
            f"github: {where}: not found (404: {message})",
            hint="check owner, repo and numbers; a private repository answers 404 to a token without access",
        )
    if response.status == 422:
        return ToolError(f"github: {where}: GitHub refused the input (422: {message})", hint="fix the fields it names")
    return ToolError(f"github: {where} failed ({response.status}: {message})", hint="retry later or check the input")
