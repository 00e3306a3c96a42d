"""The agent loop and the model providers it talks to (``docs/agent.md``).

``AgentLoop`` runs a skill: a model reads the rendered skill and the user's message, calls
tools, and every call goes through the one call chain. Providers speak OpenAI's Chat
Completions (any OpenAI-compatible server) or Anthropic's Messages API over the official SDKs,
which are imported only when a run opens a provider.
"""

from pincer.llm.messages import (
    CompletionOptions,
    Message,
    ModelEvent,
    Retrying,
    TextDelta,
    TokenUsage,
    ToolCall,
    ToolCallReady,
    ToolDefinition,
    TurnEnd,
    UsageReport,
)
from pincer.llm.provider import Provider, open_provider, resolve_api_key
from pincer.llm.run import Run, RunEvent, RunRequest, ToolCallRecord

__all__ = [
    "CompletionOptions",
    "Message",
    "ModelEvent",
    "Retrying",
    "TextDelta",
    "TokenUsage",
    "ToolCall",
    "ToolCallReady",
    "ToolDefinition",
    "TurnEnd",
    "UsageReport",
    "Provider",
    "open_provider",
    "resolve_api_key",
    "Run",
    "RunEvent",
    "RunRequest",
    "ToolCallRecord",
]
