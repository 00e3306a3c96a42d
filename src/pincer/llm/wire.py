"""What both providers share on the wire: default URLs, Retry-After, and how a provider's own
message is repeated. Apart from :mod:`pincer.llm.provider` (which imports the providers to make one)
so that the providers import this and not it: no import circle.
"""

from __future__ import annotations

import re
from typing import Any

from pincer.core.errors import ProviderError, ProviderUnavailable

__all__ = ["OPENAI_DEFAULT_URL", "ANTHROPIC_DEFAULT_URL", "parse_retry_after", "shorten", "stream_broken", "tried_url"]

# Always passed explicitly: the SDKs would otherwise read OPENAI_BASE_URL / ANTHROPIC_BASE_URL.
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
_MAX_PROVIDER_MESSAGE_CHARS = 300


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; an HTTP date is not waited on)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is not None:
            return max(0.0, float(value))
    except (TypeError, ValueError):
        return None
    return None


_KEYISH = re.compile(r"\b(?:sk|pk|rk|key)[-_][A-Za-z0-9_\-*.]{6,}")


def tried_url(exc: BaseException) -> str:
    """`` at URL`` for the request an SDK error was about (scheme, host, port and path: no
    user, password or query, where a key could sit), else the empty string."""
    from urllib.parse import urlsplit

    url = getattr(getattr(exc, "request", None), "url", None)
    if url is None:
        return ""
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return ""
    if not parts.scheme or not host:
        return ""
    shown = f"[{host}]" if ":" in host else host
    return f" at {parts.scheme}://{shown}{port}{parts.path}"


def shorten(text: str) -> str:
    """A provider's own message, as far as we repeat it: one line, bounded, without anything
    that looks like a key (a provider may quote the key it refused)."""
    line = " ".join(str(text).split())
    line = _KEYISH.sub("[REDACTED]", line)
    if len(line) > _MAX_PROVIDER_MESSAGE_CHARS:
        line = line[:_MAX_PROVIDER_MESSAGE_CHARS] + "..."
    return line


def stream_broken(provider: str, exc: BaseException) -> ProviderError:
    return ProviderUnavailable(
        f"the {provider} stream broke off before the turn ended ({type(exc).__name__})",
        hint="retried up to [llm] max_retries times; check the server, or set [llm] stream = false",
    )
