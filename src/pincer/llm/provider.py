"""The provider seam: one Protocol, two implementations over the official SDKs.

    provider = open_provider(settings, api_key)
    async for event in provider.complete(messages, tools, options):
        ...   # TextDelta, ToolCallReady, UsageReport, then TurnEnd

``openai`` speaks Chat Completions to any OpenAI-compatible ``base_url`` (OpenAI, Ollama, vLLM,
llama.cpp's server, LM Studio, OpenRouter); ``anthropic`` speaks the Messages API. The SDKs are
imported when a provider is made, never by a command that does not run a model.

API keys come only from the secret store (``api_key_secret``) or an environment variable named
in the config (``api_key_env``); :func:`resolve_api_key` reads them, the value goes to the SDK
client and to the leak scanner, and nowhere else. The SDKs' own retries are off: the loop
retries (``retry.py``) so that a turn is asked again only as a whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from pincer.config import ModelSettings
from pincer.core.errors import ConfigError, SecretError
from pincer.core.extras import require
from pincer.llm.messages import CompletionOptions, Message, ModelEvent, ToolDefinition
from pincer.llm.wire import (
    ANTHROPIC_DEFAULT_URL,
    OPENAI_DEFAULT_URL,
    parse_retry_after,
    shorten,
    stream_broken,
    tried_url,
)

if TYPE_CHECKING:
    from pincer.secrets.store import SecretStore

__all__ = [
    "Provider",
    "open_provider",
    "resolve_api_key",
    "NO_API_KEY",
    "OPENAI_DEFAULT_URL",
    "ANTHROPIC_DEFAULT_URL",
    "parse_retry_after",
    "shorten",
    "stream_broken",
    "tried_url",
    "MAX_RETRY_AFTER_S",
]

# Sent when no key is configured: a local server (Ollama, llama.cpp) needs none, and a server
# that does answers 401, which says which setting to fill in.
NO_API_KEY = "no-key-configured"
MAX_RETRY_AFTER_S = 120.0  # a Retry-After beyond this is not waited for: the turn fails instead


class Provider(Protocol):
    name: str  # "openai" | "anthropic"

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], options: CompletionOptions
    ) -> AsyncIterator[ModelEvent]: ...

    async def aclose(self) -> None: ...


def resolve_api_key(settings: ModelSettings, secrets: SecretStore, environ: Mapping[str, str]) -> str | None:
    """The API key named by the settings, or None when none is configured. Raises ConfigError
    naming the setting (never the value) when the named secret or variable is missing."""
    if settings.api_key_secret:
        try:
            value = secrets.get(settings.api_key_secret)
        except SecretError:
            value = None
        if not value:
            raise ConfigError(
                f"the API key secret {settings.api_key_secret!r} ({settings.key_table} api_key_secret) is not in the secret store",
                hint=f"store it with `pincer secrets set {settings.api_key_secret}` (the value is read from stdin)",
            )
        return str(value)
    if settings.api_key_env:
        value = environ.get(settings.api_key_env)
        if not value:
            raise ConfigError(
                f"the environment variable {settings.api_key_env} ({settings.key_table} api_key_env) is not set",
                hint="export it before running, or store the key with `pincer secrets set NAME` and set [llm] api_key_secret"
                if settings.key_table == "[llm]"
                else f"export it before running, or store the key with `pincer secrets set NAME` and set api_key_secret in {settings.key_table}",
            )
        return value
    return None


def open_provider(settings: ModelSettings, api_key: str | None) -> Provider:
    """A provider for ``settings``; the SDK is imported here."""
    if not settings.model:
        raise ConfigError(
            "no model is configured for the agent loop",
            hint='set [llm] model in config.toml (and [llm] provider, base_url, api_key_secret), e.g. model = "gpt-4o-mini"',
        )
    if settings.provider in ("anthropic", "openai"):
        require("agent", settings.provider)  # the SDK the adapter below imports: ExtraMissing names pincer[agent]
    if settings.provider == "anthropic":
        from pincer.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(settings, api_key or NO_API_KEY)
    if settings.provider == "openai":
        from pincer.llm.openai_provider import OpenAIProvider

        return OpenAIProvider(settings, api_key or NO_API_KEY)
    raise ConfigError(f"unknown provider {settings.provider!r}", hint="set [llm] provider to openai or anthropic")
