"""What a model server may answer: the API's shape, and no more text than a turn can hold.

A model server is outside the machine and may be hostile, broken, or not a model server at all
(a proxy's HTML error page with status 200). Two rules, for both providers, whole and streamed:

- An answer that is not the API's shape (HTML, ``null``, a list, a chunk that is a list, a
  content that is not text) is :class:`~pincer.core.errors.ProviderAnswerInvalid`: the run
  fails with it, never with an ``AttributeError`` that would leave the run without a status.
- One turn's text and tool-call arguments are bounded by what ``max_output_tokens`` allows,
  *counted*, not taken from the usage the server claims: at most ``BYTES_PER_TOKEN_CEILING``
  UTF-8 bytes a token (a real tokenizer's longest tokens stay below it; ordinary text is about
  4 bytes a token), with ``MIN_BOUNDED_TOKENS`` as the floor (a turn near the end of the run's
  output budget asks for little but may still say a sentence), and never more than
  ``MAX_TURN_OUTPUT_BYTES``. Past it the run fails with
  :class:`~pincer.core.errors.ModelOutputTooLarge` (not cut: a cut answer could be a cut tool
  call), and nothing of the turn is stored.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from pincer.core.errors import ModelOutputTooLarge, ProviderAnswerInvalid
from pincer.llm.messages import CompletionOptions, ModelEvent, TextDelta, ToolCallReady

__all__ = [
    "BYTES_PER_TOKEN_CEILING",
    "MIN_BOUNDED_TOKENS",
    "MAX_TURN_OUTPUT_BYTES",
    "SHAPE_ERRORS",
    "answer_invalid",
    "turn_output_limit",
    "bound_output",
    "text_of",
]

BYTES_PER_TOKEN_CEILING = 16
MIN_BOUNDED_TOKENS = 1_024
MAX_TURN_OUTPUT_BYTES = 8 * 1024 * 1024
# What reading a wrong shape raises (an attribute of a str, an index of None, a key of a list).
SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError, ArithmeticError)


def answer_invalid(provider: str, what: object) -> ProviderAnswerInvalid:
    shown = what if isinstance(what, str) else type(what).__name__
    return ProviderAnswerInvalid(
        f"the {provider} server answered with something that is not a model's answer ({shown})",
        hint="check [llm] base_url: it must be the API's address (for OpenAI-compatible servers, the one ending in /v1)",
    )


def text_of(value: object, provider: str) -> str:
    """A text field of an answer: a string, or nothing (None, empty); anything else is invalid."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise answer_invalid(provider, f"a text field holds a {type(value).__name__}")
    return value


def turn_output_limit(max_output_tokens: int) -> int:
    """The most UTF-8 bytes of text and tool arguments one turn may bring."""
    return min(MAX_TURN_OUTPUT_BYTES, max(max_output_tokens, MIN_BOUNDED_TOKENS) * BYTES_PER_TOKEN_CEILING)


async def bound_output(
    events: AsyncIterator[ModelEvent], options: CompletionOptions, provider: str
) -> AsyncGenerator[ModelEvent, None]:
    """``events`` of one attempt, refused once their text passes :func:`turn_output_limit`."""
    limit = turn_output_limit(options.max_output_tokens)
    size = 0
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                size += len(event.text.encode("utf-8", "surrogatepass"))
            elif isinstance(event, ToolCallReady):
                size += len(event.call.raw_arguments.encode("utf-8", "surrogatepass")) + len(event.call.name)
            if size > limit:
                raise _too_large(provider, limit, size, options)
            yield event
    finally:
        close = getattr(events, "aclose", None)  # the provider's generator: its stream closes now
        if close is not None:
            await close()


def _too_large(provider: str, limit: int, size: int, options: CompletionOptions) -> ModelOutputTooLarge:
    return ModelOutputTooLarge(
        f"the {provider} server sent more than {limit:,} bytes of text in one turn ({size:,} so far, about "
        f"{size // 4:,} tokens at 4 bytes each), more than max_output_tokens = {options.max_output_tokens:,} "
        f"allows at {BYTES_PER_TOKEN_CEILING} bytes a token; the run stops here",
        hint="check the model server; if the model really writes this much, raise [llm] max_output_tokens",
    )
