"""Event names of webhook deliveries, and how a hook's filter or a skill's trigger matches one.

GitHub's ``X-GitHub-Event`` header plus the payload's ``action`` become ``github.EVENT.ACTION``
(``github.push`` for events without an action), with ``pull_request`` shortened to ``pr``:
``github.pr.opened``, ``github.issues.opened``, ``github.push``. A skill written against the
long form (``webhook: github.pull_request.opened``) names the same event. Other senders name
the event in the payload (``type``, Standard Webhooks' convention, or ``event``) or in an
``X-Pincer-Event`` header.

A pattern matches an event when it is the same name, a ``*`` glob over it, or a prefix of it
that ends at a dot (``github.pr`` matches ``github.pr.opened``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["github_event", "delivery_event", "canonical_event", "event_matches", "EVENT_HEADER"]

EVENT_HEADER = "x-pincer-event"
_SHORT = {"pull_request": "pr"}
_NAME = re.compile(r"[^A-Za-z0-9_.:*-]")
_MAX_EVENT_CHARS = 200


def _clean(text: str) -> str:
    return _NAME.sub("_", text.strip())[:_MAX_EVENT_CHARS]


def github_event(header: str, payload: Any) -> str:
    name = _SHORT.get(header.strip(), header.strip())
    action = payload.get("action") if isinstance(payload, Mapping) else None
    if isinstance(action, str) and action.strip():
        return _clean(f"github.{name}.{action.strip()}")
    return _clean(f"github.{name}")


def delivery_event(auth: str, headers: Mapping[str, str], payload: Any) -> str | None:
    """The event a delivery names, or None when it names none."""
    if auth == "github" and headers.get("x-github-event"):
        return github_event(headers["x-github-event"], payload)
    if headers.get(EVENT_HEADER):
        return _clean(headers[EVENT_HEADER])
    if isinstance(payload, Mapping):
        for key in ("type", "event"):
            value = payload.get(key)
            if isinstance(value, str) and value.strip():
                return _clean(value)
    return None


def canonical_event(name: str) -> str:
    """``github.pull_request.opened`` -> ``github.pr.opened``; other names unchanged."""
    parts = name.strip().split(".")
    if len(parts) >= 2 and parts[0] == "github":
        parts[1] = _SHORT.get(parts[1], parts[1])
    return ".".join(parts)


def event_matches(pattern: str, event: str | None) -> bool:
    if event is None:
        return False
    pattern, event = canonical_event(pattern), canonical_event(event)
    if pattern in ("*", event) or event.startswith(pattern + "."):
        return True
    return any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(event, pattern)
