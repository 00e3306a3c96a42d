"""Slash commands: ``/NAME args`` -> the skill whose ``command: /NAME`` trigger it is, with its
parameters.

The same parser serves ``pincer chat``, ``POST /api/v1/commands`` and the MCP prompts named
after commands. Arguments are split like a shell does (quotes group words) and map onto the
skill's declared parameters: ``key=value`` by name, the rest by position in declared order;
words past the last parameter join it when it takes text. A skill without parameters gets the
whole argument text (Claude Code's ``$ARGUMENTS``). Values are then checked and coerced by the
skill's parameter types, exactly like ``--param``.

Only eligible, user-invocable skills answer commands; when two declare the same command, the
one from the higher-precedence root wins (the library lists skills in that order), except that a
trusted skill always wins over one installed from a hub. A parameter named twice is refused.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pincer.core.errors import ArgumentsInvalid, CommandNotFound
from pincer.skills.model import ParamType, Skill, Trust
from pincer.skills.params import coerce_params

__all__ = ["CommandCall", "command_table", "parse_command", "command_name", "MAX_COMMAND_CHARS"]

MAX_COMMAND_CHARS = 16_384
_NAME = re.compile(r"^/[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandCall:
    """A parsed command: which skill, with which parameters (coerced), and its raw argument text."""

    command: str  # "/review"
    skill: Skill
    params: Mapping[str, Any]
    arguments: str

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "skill": self.skill.name, "params": dict(self.params), "arguments": self.arguments}


def command_name(value: str) -> str:
    """A trigger's value as a command name: ``review`` and ``/review`` are ``/review``."""
    text = value.strip()
    return text if text.startswith("/") else "/" + text


def command_table(skills: Iterable[Skill]) -> dict[str, Skill]:
    """``/NAME`` -> the skill that answers it: the first trusted one listed, else the first
    installed one. The installed root sits above the bundled one, and a hub skill that declares
    ``/review`` must not answer a command the user knows as pincer's own."""
    listed = list(skills)
    table: dict[str, Skill] = {}
    for skill in [s for s in listed if s.trust is not Trust.INSTALLED] + [s for s in listed if s.trust is Trust.INSTALLED]:
        for trigger in skill.triggers:
            if trigger.kind == "command" and trigger.value:
                table.setdefault(command_name(trigger.value).lower(), skill)
    return table


def parse_command(text: str, table: Mapping[str, Skill]) -> CommandCall:
    """``/review src/app.py focus=security`` -> a :class:`CommandCall`; errors say what to fix."""
    raw = text.strip()
    if len(raw) > MAX_COMMAND_CHARS:
        raise ArgumentsInvalid(f"the command is longer than {MAX_COMMAND_CHARS:,} characters", hint="send less")
    head, _, rest = raw.partition(" ")
    if not raw.startswith("/") or not _NAME.match(head):
        raise ArgumentsInvalid(
            f"{raw[:60]!r} is not a command", hint=f"a command starts with / and a name, e.g. {_example(table)}"
        )
    skill = table.get(head.lower())
    if skill is None:
        raise CommandNotFound(
            f"no command {head}; known commands: {_known(table)}",
            hint="`pincer triggers list` shows every command and the skill behind it",
        )
    arguments = rest.strip()
    params = _map_arguments(skill, head, arguments)
    return CommandCall(command=head.lower(), skill=skill, params=coerce_params(skill, params), arguments=arguments)


def _map_arguments(skill: Skill, command: str, arguments: str) -> dict[str, Any]:
    if not skill.parameters:
        return {}
    try:
        words = shlex.split(arguments, posix=True)
    except ValueError as exc:
        raise ArgumentsInvalid(f"{command}: {exc}", hint="close the quotes, or leave them out") from None
    declared = [p.name for p in skill.parameters]
    named: dict[str, Any] = {}
    positional: list[str] = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in declared:
            if key in named:
                raise ArgumentsInvalid(f"{command}: {key} is given more than once", hint=f"name {key}= once")
            named[key] = value
        else:
            positional.append(word)
    free = [name for name in declared if name not in named]
    if len(positional) > len(free):
        last = skill.parameters[declared.index(free[-1])] if free else None
        if last is None or last.type is not ParamType.STRING:
            raise ArgumentsInvalid(
                f"{command} takes {len(declared)} argument{'s' if len(declared) != 1 else ''} "
                f"({', '.join(declared)}), got {len(positional) + len(named)}",
                hint=f"name them: {command} " + " ".join(f"{n}=VALUE" for n in declared),
            )
        keep = len(free) - 1
        positional = [*positional[:keep], " ".join(positional[keep:])]
    named.update(zip(free, positional, strict=False))
    return named


def _known(table: Mapping[str, Skill]) -> str:
    return ", ".join(sorted(table)) or "none (no eligible skill declares a command: trigger)"


def _example(table: Mapping[str, Skill]) -> str:
    return next(iter(sorted(table)), "/review") + " ARGS"
