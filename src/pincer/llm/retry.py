"""A turn asked again when the provider could not answer it: 429, 5xx, a dropped stream.

A turn is retried only as a whole: what arrived of a failed attempt (text, half a tool call) is
announced as discarded with a :class:`Retrying` event, and no tool call is ever taken from a
turn that did not end properly, so a retry cannot run a tool twice. Waits honour the provider's
``Retry-After`` (at most ``MAX_RETRY_AFTER_S``, else the turn fails at once) and otherwise back
off exponentially from ``BACKOFF_BASE_S`` with a little jitter, up to ``MAX_BACKOFF_S``.
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

import anyio

from pincer.core.errors import ProviderError
from pincer.llm.answers import bound_output
from pincer.llm.messages import CompletionOptions, Message, ModelEvent, Retrying, ToolDefinition
from pincer.llm.provider import MAX_RETRY_AFTER_S, Provider

__all__ = ["complete_with_retries", "backoff_s", "BACKOFF_BASE_S", "MAX_BACKOFF_S"]

BACKOFF_BASE_S = 0.5
MAX_BACKOFF_S = 20.0


def backoff_s(attempt: int, retry_after_s: float | None) -> float:
    """How long to wait before retry number ``attempt`` (1-based)."""
    if retry_after_s is not None:
        return retry_after_s
    base = min(MAX_BACKOFF_S, BACKOFF_BASE_S * 2.0 ** (attempt - 1))
    return base * (1 + random.random() * 0.25)  # jitter spreads clients that failed together


async def complete_with_retries(
    provider: Provider,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    options: CompletionOptions,
    *,
    max_retries: int,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> AsyncGenerator[ModelEvent, None]:
    attempt = 0
    while True:
        try:
            # each attempt bounded on its own (answers.py): a retry starts its count again
            attempt_events = bound_output(provider.complete(messages, tools, options), options, getattr(provider, "name", "model"))
            async for event in attempt_events:
                yield event
            return
        except ProviderError as exc:
            if not exc.retryable or attempt >= max_retries:
                raise
            attempt += 1
            wait = backoff_s(attempt, exc.retry_after_s)
            if wait > MAX_RETRY_AFTER_S:
                raise
            yield Retrying(attempt=attempt, after_s=wait, reason=exc.message, code=exc.code)
            await sleep(wait)
