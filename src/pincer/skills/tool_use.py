"""What a skill expects of the tools here: the names it declares, and the tools its body relies on.

A skill written for IronClaw can rely on tools pincer has no runtime for (its ``shell`` tool,
its memory tools) or on CodeAct, where the model ends a run with ``FINAL(answer)`` in code that
IronClaw executes. Such a skill loads and renders, and then fails in a way the model cannot
explain; these warnings say so up front. Pure: the names of the tools a home offers come in.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection

from pincer.skills.model import Issue, Skill

__all__ = ["tool_problems", "FOREIGN_TOOLS"]

# Tools of the systems pincer descends from that it does not ship (its own builtins share the
# other IronClaw names: echo, time, json, http, read_file, write_file, list_dir).
FOREIGN_TOOLS = {
    "shell": "the shell tool of IronClaw and OpenClaw",
    "apply_patch": "IronClaw's patch tool",
    "memory_search": "IronClaw's workspace memory",
    "memory_write": "IronClaw's workspace memory",
    "memory_read": "IronClaw's workspace memory",
    "memory_tree": "IronClaw's workspace memory",
}
_CODEACT = re.compile(r"\bFINAL(?:_VAR)?\(")


def _mentions(body: str, name: str) -> bool:
    """``name`` as a tool: in backticks, called, or "the NAME tool"."""
    quoted = re.escape(name)
    return re.search(rf"`{quoted}`|\b{quoted}\(|\bthe {quoted} tool\b", body, re.IGNORECASE) is not None


def tool_problems(skill: Skill, offered: Collection[str]) -> tuple[Issue, ...]:
    """Warnings for the tools ``skill`` names (``tools`` / ``allowed-tools``) that match none of
    ``offered``, and for what its body relies on that nothing here runs."""
    names = [n.lower() for n in offered]
    issues: list[Issue] = []
    for pattern in skill.tools:
        if not any(fnmatch.fnmatchcase(n, pattern.lower()) for n in names):
            issues.append(
                Issue(key="tools", message=f"names {pattern!r}, and no tool here has that name (`pincer tools list` shows them)")
            )
    if _CODEACT.search(skill.body):
        issues.append(
            Issue(
                key="body",
                message="uses CodeAct's FINAL(...), which pincer does not execute: the agent loop takes the model's "
                "plain answer as the result (rewrite that step as 'answer with ...')",
            )
        )
    for name, what in FOREIGN_TOOLS.items():
        if name not in names and _mentions(skill.body, name):
            issues.append(Issue(key="body", message=f"relies on the {name} tool ({what}), and no tool here has that name"))
    return tuple(issues)
