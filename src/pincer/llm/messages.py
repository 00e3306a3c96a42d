"""The values a provider is given and gives back: messages, tool definitions, model events.

One neutral form for both wire formats. A provider turns :class:`Message` values into its own
request and its stream (or response) into :class:`ModelEvent` values; the agent loop never sees
an SDK object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pincer.config import ModelSettings

__all__ = [
    "Role",
    "ToolCall",
    "Message",
    "ToolDefinition",
    "CompletionOptions",
    "TokenUsage",
    "TextDelta",
    "ToolCallReady",
    "UsageReport",
    "TurnEnd",
    "Retrying",
    "ModelEvent",
    "StopReason",
    "parse_arguments",
]

Role = Literal["system", "user", "assistant", "tool"]
# Normalised stop reasons: end (the model finished), tool_calls, max_tokens, refusal, other.
StopReason = Literal["end", "tool_calls", "max_tokens", "refusal", "other"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool call the model asked for. ``arguments`` is None when ``raw_arguments`` is not a
    JSON object; the loop then answers with a tool error instead of running anything."""

    id: str
    name: str  # the provider-safe name the model used
    arguments: Mapping[str, Any] | None
    raw_arguments: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments is None:
            data["raw_arguments"] = self.raw_arguments
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation. ``tool`` messages answer one call (``tool_call_id``),
    ``is_error`` marks a failed call; ``assistant`` messages may carry tool calls."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool a tool message answers (provider-safe name)
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.is_error:
            data["is_error"] = True
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it: a provider-safe name, a description, a JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class CompletionOptions:
    model: str
    max_output_tokens: int = ModelSettings().max_output_tokens  # [llm]'s default
    stream: bool = True
    parallel_tool_calls: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def __post_init__(self) -> None:
        # The counts come from the model server: a negative one would buy the token and cost
        # budgets back, so a count below zero is read as zero.
        for name in ("input_tokens", "output_tokens", "cached_input_tokens"):
            if getattr(self, name) < 0:
                object.__setattr__(self, name, 0)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
        }


# -- events of one completion ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallReady:
    """A tool call whose arguments have arrived whole (streaming providers assemble the deltas)."""

    call: ToolCall


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageReport:
    usage: TokenUsage


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnd:
    """The completion ended as the provider said it did (the last event of a good turn)."""

    stop: StopReason
    raw_stop: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Retrying:
    """The turn failed and is being asked again (what arrived of it is to be discarded)."""

    attempt: int
    after_s: float
    reason: str
    code: str = "provider_unavailable"
    details: Mapping[str, Any] = field(default_factory=dict)


ModelEvent = TextDelta | ToolCallReady | UsageReport | TurnEnd | Retrying


def parse_arguments(raw: str) -> Mapping[str, Any] | None:
    """A tool call's arguments as an object, or None when they are not one (malformed JSON)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
