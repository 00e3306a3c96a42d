"""Outputs trimmed to what a model needs: API objects carry dozens of URL templates, node ids and
avatar links that cost tokens and say nothing. The rules are generic, so every built-in's
answers shrink the same way:

* keys ending in ``_url`` are dropped, except ``html_url`` and ``download_url`` (where a person
  or the next call goes); so are ``node_id``, ``gravatar_id`` and ``_links``;
* a user or organisation object (``login`` + ``id``) becomes its login;
* long text fields are cut at :data:`MAX_TEXT_CHARS` with a marker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["trim", "trim_fields", "MAX_TEXT_CHARS"]

MAX_TEXT_CHARS = 20_000
_KEEP_URLS = frozenset({"html_url", "download_url"})
_DROP = frozenset({"node_id", "gravatar_id", "_links", "url", "performed_via_github_app", "reactions"})
_MAX_DEPTH = 12


def trim(value: Any, *, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        if "login" in value and "id" in value and ("avatar_url" in value or "type" in value):
            return value.get("login")
        return _fields(value, depth)
    if isinstance(value, list):
        return [trim(item, depth=depth + 1) for item in value]
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return value[:MAX_TEXT_CHARS] + f"… [cut: {len(value) - MAX_TEXT_CHARS} more characters]"
    return value


def trim_fields(value: Mapping[str, Any]) -> dict[str, Any]:
    """A record a built-in assembled from the fields it chose, trimmed field by field: always a
    mapping (never folded into a login, as a user object met inside an answer is)."""
    return _fields(value, 0)


def _fields(value: Mapping[str, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _DROP or (key.endswith("_url") and key not in _KEEP_URLS):
            continue
        out[key] = trim(item, depth=depth + 1)
    return out
