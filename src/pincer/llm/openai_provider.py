"""Chat Completions over the official ``openai`` SDK, for any OpenAI-compatible server.

Servers differ in what they accept: OpenAI's own API wants ``max_completion_tokens`` and takes
``parallel_tool_calls``; Ollama, vLLM, llama.cpp and LM Studio know ``max_tokens`` and may
refuse fields they do not know. So the newer fields go to OpenAI's own URL only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from pincer.config import ModelSettings
from pincer.core.errors import (
    ProviderError,
    ProviderUnavailable,
)
from pincer.core.extras import require
from pincer.llm.answers import SHAPE_ERRORS, answer_invalid, text_of
from pincer.llm.messages import (
    CompletionOptions,
    Message,
    ModelEvent,
    StopReason,
    TextDelta,
    TokenUsage,
    ToolCall,
    ToolCallReady,
    ToolDefinition,
    TurnEnd,
    UsageReport,
    parse_arguments,
)
from pincer.llm.sdk_errors import SdkDialect, translate_sdk_error
from pincer.llm.wire import OPENAI_DEFAULT_URL, stream_broken
from pincer.telemetry.tracing import TRACING, trace_headers

if TYPE_CHECKING:
    import openai
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    openai = require("agent", "openai")
    CompletionUsage = require("agent", "openai.types").CompletionUsage
    _chat = require("agent", "openai.types.chat")
    ChatCompletion, ChatCompletionChunk = _chat.ChatCompletion, _chat.ChatCompletionChunk

logger = logging.getLogger(__name__)

__all__ = ["OPENAI_ERRORS", "OpenAIProvider", "to_openai_messages"]

_STOPS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "refusal",
}
OPENAI_ERRORS = SdkDialect(
    sdk=openai,
    name="openai",
    server="the model server",
    context_statuses=frozenset({400, 413, 422}),
    context_words=(("context_length",), ("context length",), ("maximum context",), ("too many tokens",), ("prompt is too long",)),
    hints={
        "not_found": "check [llm] model (the server lists its models), and [llm] base_url",
        "refused": "check [llm] model and base_url; the server's message says what it did not accept",
        "timeout": "retried; raise [llm] timeout_s for slow local models",
    },
)


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": c.raw_arguments if c.arguments is None else json.dumps(c.arguments),
                        },
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
        for t in tools
    ]


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: ModelSettings, api_key: str) -> None:
        self.settings = settings
        self.base_url = settings.base_url or OPENAI_DEFAULT_URL
        self._is_openai = self.base_url.rstrip("/") == OPENAI_DEFAULT_URL
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=self.base_url, timeout=settings.timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        await self._client.close()

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], options: CompletionOptions
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"model": options.model, "messages": to_openai_messages(messages)}
        if self._is_openai:
            request["max_completion_tokens"] = options.max_output_tokens
        else:
            request["max_tokens"] = options.max_output_tokens
        if tools:
            request["tools"] = _tools(tools)
            if self._is_openai:
                request["parallel_tool_calls"] = options.parallel_tool_calls
        if options.stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        if TRACING.on:  # the model request is part of the run's trace (its chat span is current)
            request["extra_headers"] = trace_headers()
        return request

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], options: CompletionOptions
    ) -> AsyncIterator[ModelEvent]:
        request = self._request(messages, tools, options)
        try:
            response = await self._client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            raise self._translate(exc, options.model) from None
        if not options.stream:
            async for event in self._whole(response):
                yield event
            return
        async for event in self._stream(response):
            yield event

    async def _whole(self, response: ChatCompletion) -> AsyncIterator[ModelEvent]:
        try:
            events = _whole_events(response)
        except SHAPE_ERRORS:
            raise answer_invalid("openai", f"a {type(response).__name__} where the answer belongs") from None
        for event in events:
            yield event

    async def _stream(self, stream: openai.AsyncStream[ChatCompletionChunk]) -> AsyncIterator[ModelEvent]:
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage = TokenUsage()
        try:
            async for chunk in stream:
                try:
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    texts, finish = _read_chunk(chunk, calls, finish)
                except SHAPE_ERRORS:
                    raise answer_invalid("openai", "a stream chunk of the wrong shape") from None
                for text in texts:
                    yield TextDelta(text=text)
        except ProviderError:
            raise
        except openai.OpenAIError as exc:
            raise self._translate(exc, "") from None
        except SHAPE_ERRORS:  # the SDK could not decode a chunk (not JSON)
            raise answer_invalid("openai", "a stream chunk that is not JSON") from None
        except Exception as exc:  # noqa: BLE001 - the HTTP stack's own errors mid-stream (a dropped connection)
            raise stream_broken("openai", exc) from None
        finally:
            await stream.close()
        if finish is None:
            # Ended without a finish reason: cut off (a proxy closed it), not a finished turn.
            raise stream_broken("openai", EOFError("no finish_reason"))
        for index in sorted(calls):
            entry = calls[index]
            raw = "".join(entry["arguments"])
            yield ToolCallReady(
                call=ToolCall(id=entry["id"] or f"call_{index}", name=entry["name"], arguments=parse_arguments(raw), raw_arguments=raw)
            )
        yield UsageReport(usage=usage)
        yield TurnEnd(stop=_STOPS.get(finish, "other"), raw_stop=finish)

    def _translate(self, exc: openai.OpenAIError, model: str) -> ProviderError:
        return translate_sdk_error(exc, model or (self.settings.model or ""), OPENAI_ERRORS)


def _whole_events(response: ChatCompletion) -> list[ModelEvent]:
    """A whole completion as events; a shape error (SHAPE_ERRORS) when it is not one."""
    if not response.choices:
        raise ProviderUnavailable("the openai server answered without a choice", hint="check the server's logs")
    choice = response.choices[0]
    message = choice.message
    events: list[ModelEvent] = []
    content = text_of(message.content, "openai")
    if content:
        events.append(TextDelta(text=content))
    for call in message.tool_calls or ():
        function = getattr(call, "function", None)
        raw = text_of(function.arguments if function is not None else "", "openai")
        name = text_of(function.name if function else "", "openai")
        events.append(ToolCallReady(call=ToolCall(id=text_of(call.id, "openai"), name=name, arguments=parse_arguments(raw), raw_arguments=raw)))
    events.append(UsageReport(usage=_usage(response.usage)))
    finish = choice.finish_reason
    events.append(TurnEnd(stop=_STOPS.get(finish if isinstance(finish, str) else "", "other"), raw_stop=text_of(finish, "openai") or None))
    return events


def _read_chunk(chunk: ChatCompletionChunk, calls: dict[int, dict[str, Any]], finish: str | None) -> tuple[list[str], str | None]:
    """One stream chunk: its texts, tool-call parts gathered into ``calls``, the finish reason."""
    texts: list[str] = []
    for choice in chunk.choices or ():
        delta = choice.delta
        if delta is not None and delta.content:
            texts.append(text_of(delta.content, "openai"))
        for part in (delta.tool_calls if delta is not None else None) or ():
            if not isinstance(part.index, int):
                raise TypeError("a tool call without an index")
            entry = calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
            if part.id:
                entry["id"] = text_of(part.id, "openai")
            function = part.function
            if function is not None:
                if function.name:
                    entry["name"] = text_of(function.name, "openai")
                if function.arguments:
                    entry["arguments"].append(text_of(function.arguments, "openai"))
        if choice.finish_reason:
            finish = text_of(choice.finish_reason, "openai")
    return texts, finish


def _usage(usage: CompletionUsage | None) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return TokenUsage(
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cached_input_tokens=int(cached),
    )
