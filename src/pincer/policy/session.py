"""Session policy with OpenClaw's semantics: allow and deny lists over tool names.

- Entries are case-insensitive names with ``*`` wildcards, or groups (``group:fs``...).
- Deny wins. A non-empty allow list blocks every tool not on it.
- A session is ``main`` or ``non-main``. Sessions not named in the config are non-main, and a
  non-main session without its own lists starts from the sandbox default below.

pincer's own built-ins are members of OpenClaw's groups under their pincer names too, so that
``group:fs`` covers ``read_file``/``write_file``/``list_dir`` and ``group:web`` covers ``http``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from pincer.core.effects import Mode
from pincer.core.values import Decision

__all__ = [
    "SessionKind",
    "SessionPolicy",
    "TOOL_GROUPS",
    "SANDBOX_DEFAULT_ALLOW",
    "SANDBOX_DEFAULT_DENY",
    "expand_entries",
    "evaluate_session",
]


class SessionKind(StrEnum):
    MAIN = "main"
    NON_MAIN = "non-main"


TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "group:runtime": ("exec", "bash", "process"),
    "group:fs": ("read", "write", "edit", "apply_patch", "read_file", "write_file", "list_dir"),
    "group:sessions": ("sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "session_status"),
    "group:memory": ("memory_search", "memory_get"),
    "group:web": ("web_search", "web_fetch", "http"),
    "group:ui": ("browser", "canvas"),
    "group:automation": ("cron", "gateway"),
    "group:messaging": ("message",),
    "group:nodes": ("nodes",),
}
# OpenClaw's sandbox tool policy for non-main sessions, with pincer's file built-ins beside
# their OpenClaw names.
SANDBOX_DEFAULT_ALLOW: tuple[str, ...] = (
    "exec", "process", "read", "write", "edit", "apply_patch", "read_file", "write_file", "list_dir",
)  # fmt: skip
SANDBOX_DEFAULT_DENY: tuple[str, ...] = ("browser", "canvas", "nodes", "cron", "gateway")


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionPolicy:
    name: str
    kind: SessionKind
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    source: str = "config"

    @classmethod
    def default_for(cls, name: str) -> SessionPolicy:
        """The policy of a session nobody configured: ``main`` is main, anything else non-main."""
        if name == "main":
            return cls(name=name, kind=SessionKind.MAIN, source="default")
        return cls(
            name=name,
            kind=SessionKind.NON_MAIN,
            allow=SANDBOX_DEFAULT_ALLOW,
            deny=SANDBOX_DEFAULT_DENY,
            source="sandbox default",
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "allow": list(self.allow),
            "deny": list(self.deny),
            "source": self.source,
        }


def expand_entries(entries: Iterable[str]) -> tuple[str, ...]:
    """Lower-cased patterns with groups replaced by their members. Unknown groups stay as
    literal patterns (they match nothing), so a typo never widens a list."""
    out: list[str] = []
    for entry in entries:
        lowered = entry.strip().lower()
        if not lowered:
            continue
        out.extend(TOOL_GROUPS.get(lowered, (lowered,)))
    return tuple(out)


def _first_match(tool: str, patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        if fnmatch.fnmatchcase(tool, pattern):
            return pattern
    return None


def evaluate_session(policy: SessionPolicy, tool: str) -> Decision:
    """Allow or deny one tool for a session; the reason names the list entry that decided."""
    name = tool.lower()
    denied_by = _first_match(name, expand_entries(policy.deny))
    if denied_by is not None:
        return Decision(
            mode=Mode.DENY,
            reason=f"session {policy.name!r} ({policy.source}) denies {tool} by {denied_by!r}",
        )
    allow = expand_entries(policy.allow)
    if allow and _first_match(name, allow) is None:
        return Decision(
            mode=Mode.DENY,
            reason=f"session {policy.name!r} ({policy.source}) allows only {', '.join(policy.allow)}; "
            f"{tool} is not on its allow list",
        )
    return Decision(mode=Mode.ALLOW, reason=f"session {policy.name!r} permits {tool}")
