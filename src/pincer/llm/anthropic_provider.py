"""The Messages API over the official ``anthropic`` SDK.

The wire differs from Chat Completions in ways the conversion below takes care of: the system
prompt is a parameter, tool calls are ``tool_use`` blocks of the assistant's content, results
are ``tool_result`` blocks of a user message (consecutive ones merged into one message), and
``input_tokens`` excludes cached tokens (added back here, so usage means the same for both).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from pincer.config import ModelSettings
from pincer.core.errors import ProviderError
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
from pincer.llm.wire import ANTHROPIC_DEFAULT_URL, stream_broken
from pincer.telemetry.tracing import TRACING, trace_headers

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import MessageDeltaUsage, Usage
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    anthropic = require("agent", "anthropic")
    _types = require("agent", "anthropic.types")
    MessageDeltaUsage, Usage = _types.MessageDeltaUsage, _types.Usage

logger = logging.getLogger(__name__)

__all__ = ["ANTHROPIC_ERRORS", "AnthropicProvider", "to_anthropic_messages"]

ANTHROPIC_ERRORS = SdkDialect(
    sdk=anthropic,
    name="anthropic",
    server="the Anthropic API",
    context_statuses=frozenset({400, 413}),
    context_words=(("too long",), ("context", "limit")),
    hints={
        "not_found": "check [llm] model (for example claude-sonnet-4-5) and [llm] base_url",
        "rate_limited": "retried with backoff up to [llm] max_retries times; wait, or raise the account's limits",
        "refused": "check [llm] model; the API's message says what it did not accept",
        "unreachable": "check [llm] base_url and the network",
    },
)

_STOPS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "other",
}


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages). Consecutive messages of one role become one message."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "user":
            add("user", [{"type": "text", "text": m.content or "(empty)"}])
        elif m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content or "(empty)"}
            if m.is_error:
                block["is_error"] = True
            add("user", [block])
        else:
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for call in m.tool_calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments or {})})
            if blocks:
                add("assistant", blocks)
    return "\n\n".join(system), out


def _tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in tools]


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: ModelSettings, api_key: str) -> None:
        self.settings = settings
        self.base_url = settings.base_url or ANTHROPIC_DEFAULT_URL
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, timeout=settings.timeout_s, max_retries=0,
            # The SDK's own spans and propagation off (and its ANTHROPIC_OPEN_TELEMETRY* variables,
            # which could record the messages): the run's chat span is the one, for both providers.
            open_telemetry={"traces": False, "propagation": False},
        )  # fmt: skip

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], options: CompletionOptions
    ) -> AsyncIterator[ModelEvent]:
        system, wire = to_anthropic_messages(messages)
        request: dict[str, Any] = {"model": options.model, "max_tokens": options.max_output_tokens, "messages": wire}
        if system:
            request["system"] = system
        if tools:
            request["tools"] = _tools(tools)
            if not options.parallel_tool_calls:
                request["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if options.stream:
            request["stream"] = True
        if TRACING.on:  # the model request is part of the run's trace (its chat span is current)
            request["extra_headers"] = trace_headers()
        try:
            response = await self._client.messages.create(**request)
        except anthropic.AnthropicError as exc:
            raise translate_sdk_error(exc, options.model, ANTHROPIC_ERRORS) from None
        if options.stream:
            async for event in self._stream(response, options.model):
                yield event
            return
        try:
            events = _whole_events(response)
        except SHAPE_ERRORS:
            raise answer_invalid("anthropic", f"a {type(response).__name__} where the answer belongs") from None
        for event in events:
            yield event

    async def _stream(self, stream: Any, model: str) -> AsyncIterator[ModelEvent]:
        blocks: dict[int, dict[str, Any]] = {}
        start_usage: Usage | None = None
        output_tokens = 0
        stop: str | None = None
        finished = False
        try:
            async for event in stream:
                text = ""
                try:
                    kind = event.type
                    if kind == "message_start":
                        start_usage = event.message.usage
                    elif kind == "content_block_start":
                        block = event.content_block
                        if block.type == "tool_use":
                            blocks[event.index] = {"id": text_of(block.id, "anthropic"), "name": text_of(block.name, "anthropic"), "json": []}
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and delta.text:
                            text = text_of(delta.text, "anthropic")
                        elif delta.type == "input_json_delta" and event.index in blocks:
                            blocks[event.index]["json"].append(text_of(delta.partial_json, "anthropic"))
                    elif kind == "message_delta":
                        stop = text_of(event.delta.stop_reason, "anthropic") or stop
                        if event.usage is not None and event.usage.output_tokens is not None:
                            output_tokens = int(event.usage.output_tokens)
                    elif kind == "message_stop":
                        finished = True
                except SHAPE_ERRORS:
                    raise answer_invalid("anthropic", "a stream event of the wrong shape") from None
                if text:
                    yield TextDelta(text=text)
        except ProviderError:
            raise
        except anthropic.AnthropicError as exc:
            raise translate_sdk_error(exc, model, ANTHROPIC_ERRORS) from None
        except SHAPE_ERRORS:  # the SDK could not decode an event (not JSON)
            raise answer_invalid("anthropic", "a stream event that is not JSON") from None
        except Exception as exc:  # noqa: BLE001 - the HTTP stack's own errors mid-stream (a dropped connection)
            raise stream_broken("anthropic", exc) from None
        finally:
            await stream.close()
        if not finished:
            raise stream_broken("anthropic", EOFError("no message_stop"))
        for index in sorted(blocks):
            entry = blocks[index]
            raw = "".join(entry["json"])
            yield ToolCallReady(call=ToolCall(id=entry["id"], name=entry["name"], arguments=parse_arguments(raw), raw_arguments=raw))
        try:
            usage = _usage(start_usage, None)
        except SHAPE_ERRORS:
            raise answer_invalid("anthropic", "the usage of message_start") from None
        yield UsageReport(usage=TokenUsage(input_tokens=usage.input_tokens, output_tokens=output_tokens, cached_input_tokens=usage.cached_input_tokens))
        yield TurnEnd(stop=_STOPS.get(stop or "", "other"), raw_stop=stop)


def _whole_events(response: anthropic.types.Message) -> list[ModelEvent]:
    """A whole message as events; a shape error (SHAPE_ERRORS) when it is not one."""
    events: list[ModelEvent] = []
    for block in response.content:
        if block.type == "text" and block.text:
            events.append(TextDelta(text=text_of(block.text, "anthropic")))
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else None
            call = ToolCall(
                id=text_of(block.id, "anthropic"), name=text_of(block.name, "anthropic"), arguments=arguments,
                raw_arguments=json.dumps(block.input),
            )  # fmt: skip
            events.append(ToolCallReady(call=call))
    events.append(UsageReport(usage=_usage(response.usage, response.usage)))
    stop = text_of(response.stop_reason, "anthropic")
    events.append(TurnEnd(stop=_STOPS.get(stop, "other"), raw_stop=stop))
    return events


def _usage(usage: Usage | None, final: Usage | MessageDeltaUsage | None) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    cached = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    created = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    return TokenUsage(
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0) + cached + created,
        output_tokens=int(getattr(final, "output_tokens", 0) or 0) if final is not None else 0,
        cached_input_tokens=cached,
    )
