"""What a session can see: the one rule behind REST, MCP ``tools/list`` and the CLI (and, for
skills, :func:`skills_visible` behind every path that hands out a skill).

A session sees the tools its session policy does not deny. A tool it cannot see is, to that
session, a tool that does not exist: describing it (its schema, its effects) would tell an agent
what it has been kept away from, so lookups answer "no tool named X" exactly as for a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from pincer.core.effects import Mode
from pincer.core.errors import Denied, ToolNotFound
from pincer.core.values import ToolResult, ToolSpec
from pincer.policy.session import SessionPolicy, evaluate_session

__all__ = [
    "can_see", "visible_tools", "visible_tool", "as_seen", "skills_visible", "require_skills_visible", "SKILL_TOOL_NAME",
]  # fmt: skip

SKILL_TOOL_NAME = "skill"


def can_see(policy: SessionPolicy, tool: str) -> bool:
    return evaluate_session(policy, tool).mode is not Mode.DENY


def visible_tools(policy: SessionPolicy, specs: Iterable[ToolSpec]) -> list[ToolSpec]:
    return [spec for spec in specs if can_see(policy, spec.name)]


def _not_found(name: str, policy: SessionPolicy) -> ToolNotFound:
    """The same answer for a hidden tool as for a missing one (the caller may be the agent the
    policy keeps away from it), true for both: it names the session's own list and the key
    that opens a tool to it. A bare `pincer tools list` lists main's tools, the hidden ones too."""
    if policy.name == "main":
        return ToolNotFound(f"no tool named {name!r}", hint="`pincer tools list` shows the tools there are")
    session = policy.name
    return ToolNotFound(
        f"no tool named {name!r} in session {session!r} (its session policy hides the tools it does not allow)",
        hint=f"`pincer tools list --session {session}` lists what it sees; to open a tool to it, add the tool's "
        f"name to [sessions.{session}] allow in config.toml",
    )


def visible_tool(policy: SessionPolicy, lookup: Callable[[str], ToolSpec], name: str) -> ToolSpec:
    """The tool, if the session may see it; ToolNotFound (the same as for a missing tool) if not."""
    if not can_see(policy, name):
        raise _not_found(name, policy)
    try:
        return lookup(name)
    except ToolNotFound:
        raise _not_found(name, policy) from None


def as_seen(policy: SessionPolicy, name: str, result: ToolResult) -> ToolResult:
    """A call's result as the calling session may see it: a call to a tool it cannot see was
    refused (and audited) by the session step, and is answered as for a missing tool."""
    if result.ok or can_see(policy, name):
        return result
    return replace(result, error=_not_found(name, policy).to_dict(), content=None)


def skills_visible(policy: SessionPolicy) -> bool:
    """Whether a session may read skills at all, on any path (the ``skill`` tool, MCP prompts,
    resources and the skills extension, REST commands): exactly when it may see the ``skill``
    tool. A policy that withholds the tool withholds what the tool would return."""
    return can_see(policy, SKILL_TOOL_NAME)


def require_skills_visible(policy: SessionPolicy, session: str) -> None:
    """Denied unless :func:`skills_visible`: for a caller that names a skill to start (REST runs
    and commands), whose run would carry the skill's text back to it."""
    if not skills_visible(policy):
        raise Denied(
            f"session {session!r} may not see skills: its policy withholds the skill tool",
            hint="add skill to the session's allow list in config.toml, or use a token of a session that has it",
        )
