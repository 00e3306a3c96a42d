"""What a session can see: the one rule behind REST, MCP ``tools/list`` and the CLI.

A session sees the tools its session policy does not deny. A tool it cannot see is, to that
session, a tool that does not exist: describing it (its schema, its effects) would tell an agent
what it has been kept away from, so lookups answer "no tool named X" exactly as for a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from pincer.core.effects import Mode
from pincer.core.errors import ToolNotFound
from pincer.core.values import ToolResult, ToolSpec
from pincer.policy.session import SessionPolicy, evaluate_session

__all__ = ["can_see", "visible_tools", "visible_tool", "as_seen"]


def can_see(policy: SessionPolicy, tool: str) -> bool:
    return evaluate_session(policy, tool).mode is not Mode.DENY


def visible_tools(policy: SessionPolicy, specs: Iterable[ToolSpec]) -> list[ToolSpec]:
    return [spec for spec in specs if can_see(policy, spec.name)]


def _not_found(name: str) -> ToolNotFound:
    return ToolNotFound(f"no tool named {name!r}", hint="`pincer tools list` shows the tools there are")


def visible_tool(policy: SessionPolicy, lookup: Callable[[str], ToolSpec], name: str) -> ToolSpec:
    """The tool, if the session may see it; ToolNotFound (the same as for a missing tool) if not."""
    if not can_see(policy, name):
        raise _not_found(name)
    return lookup(name)


def as_seen(policy: SessionPolicy, name: str, result: ToolResult) -> ToolResult:
    """A call's result as the calling session may see it: a call to a tool it cannot see was
    refused (and audited) by the session step, and is answered as for a missing tool."""
    if result.ok or can_see(policy, name):
        return result
    return replace(result, error=_not_found(name).to_dict(), content=None)
