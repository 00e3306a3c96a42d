"""The Skill value and its parts: what every SKILL.md dialect is read into.

A skill is a folder with a ``SKILL.md`` (YAML frontmatter + Markdown instructions) and optional
files. Whatever dialect the file is written in (pincer / classic IronClaw, IronClaw, OpenClaw,
the Agent Skills spec, Claude Code, or no frontmatter at all), the loader produces one frozen
:class:`Skill`. Spec violations are :class:`Issue` warnings attached to it, never a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Dialect",
    "Trust",
    "ParamType",
    "Parameter",
    "Trigger",
    "Activation",
    "Requires",
    "Field",
    "Capability",
    "Issue",
    "Skill",
    "DEFAULT_MAX_CONTEXT_TOKENS",
]

DEFAULT_MAX_CONTEXT_TOKENS = 2000


class Dialect(StrEnum):
    """The dialect a SKILL.md is written in; the richest one detected names the skill's."""

    PINCER = "pincer"  # pincer's own: classic IronClaw's parameters, triggers, tools
    IRONCLAW = "ironclaw"  # activation, requires, credentials
    OPENCLAW = "openclaw"  # metadata.openclaw (or legacy metadata.clawdbot), user-invocable, ...
    CLAUDE = "claude"  # Claude Code: when_to_use, argument-hint, arguments, $ARGUMENTS
    AGENT_SKILLS = "agentskills"  # the Agent Skills spec (agentskills.io)
    PLAIN = "plain"  # no frontmatter at all


class Trust(StrEnum):
    """``trusted``: the user's own skills (workspace, home, extra_dirs) and pincer's bundled ones.
    ``installed``: skills from the hub or an MCP server; the tools they may use are attenuated."""

    TRUSTED = "trusted"
    INSTALLED = "installed"


class ParamType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ARRAY = "array"
    OBJECT = "object"


@dataclass(frozen=True, kw_only=True, slots=True)
class Parameter:
    """A declared template parameter (pincer dialect; Claude Code's named ``arguments`` too)."""

    name: str
    type: ParamType = ParamType.STRING
    description: str = ""
    required: bool = False
    default: Any = None
    enum: tuple[Any, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "type": self.type.value,
            "description": self.description,
            "required": self.required,
        }
        if self.default is not None:
            data["default"] = self.default
        if self.enum is not None:
            data["enum"] = list(self.enum)
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Trigger:
    """``webhook: EVENT`` | ``command: /NAME`` | ``schedule: CRON`` | ``manual``."""

    kind: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.kind, "value": self.value} if self.value else {"type": self.kind}

    def __str__(self) -> str:
        return f"{self.kind}: {self.value}" if self.value else self.kind


@dataclass(frozen=True, kw_only=True, slots=True)
class Activation:
    """IronClaw's activation block: what makes ``select`` pick the skill."""

    keywords: tuple[str, ...] = ()
    exclude_keywords: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()  # regexes, already checked to compile
    tags: tuple[str, ...] = ()
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    setup_marker: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "keywords": list(self.keywords),
            "exclude_keywords": list(self.exclude_keywords),
            "patterns": list(self.patterns),
            "tags": list(self.tags),
            "max_context_tokens": self.max_context_tokens,
            "setup_marker": self.setup_marker,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Requires:
    """What must be present for the skill to be eligible (IronClaw ``requires`` and OpenClaw
    ``metadata.openclaw.requires`` / ``os`` merged)."""

    bins: tuple[str, ...] = ()
    any_bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    os: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "bins": list(self.bins),
            "anyBins": list(self.any_bins),
            "env": list(self.env),
            "config": list(self.config),
            "skills": list(self.skills),
            "os": list(self.os),
        }

    @property
    def is_empty(self) -> bool:
        return not (self.bins or self.any_bins or self.env or self.config or self.skills or self.os)


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One input or output of a declared capability."""

    name: str
    type: ParamType = ParamType.STRING
    description: str = ""
    required: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.value, "description": self.description, "required": self.required}


@dataclass(frozen=True, kw_only=True, slots=True)
class Capability:
    """A capability the skill declares (a ``## capability: NAME`` section, ``capabilities`` in the
    frontmatter, or ``capabilities.json``). With code to run it becomes the tool ``skill.NAME``."""

    name: str
    description: str = ""
    inputs: tuple[Field, ...] = ()
    outputs: tuple[Field, ...] = ()
    command: tuple[str, ...] = ()  # an argv template; empty: found by convention in scripts/ or src/
    effects: tuple[str, ...] = ()
    network: str = "none"  # none | allowlist | host
    allow_hosts: tuple[str, ...] = ()
    timeout_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputs": [f.to_dict() for f in self.inputs],
            "outputs": [f.to_dict() for f in self.outputs],
            "command": list(self.command),
            "effects": list(self.effects),
            "network": self.network,
            "allow_hosts": list(self.allow_hosts),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Issue:
    """A warning attached to a skill (or an error for a file that could not be loaded)."""

    message: str
    key: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.key}: {self.message}" if self.key else f"{where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "key": self.key, "line": self.line}


@dataclass(frozen=True, kw_only=True, slots=True)
class Skill:
    """One skill, whatever dialect it was written in."""

    name: str
    description: str
    path: Path  # the SKILL.md
    base_dir: Path  # the folder it sits in; ``{baseDir}`` and ``${CLAUDE_SKILL_DIR}``
    dialect: Dialect
    body: str
    content_hash: str  # sha256 of the SKILL.md bytes
    version: str | None = None
    dialects: tuple[Dialect, ...] = ()
    trust: Trust = Trust.TRUSTED
    root: str = ""  # the label of the root it was found in
    tags: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # tool names or patterns it may use (``tools`` / ``allowed-tools``)
    parameters: tuple[Parameter, ...] = ()
    triggers: tuple[Trigger, ...] = ()
    activation: Activation = field(default_factory=Activation)
    requires: Requires = field(default_factory=Requires)
    credentials: tuple[Mapping[str, Any], ...] = ()
    install: tuple[Mapping[str, Any], ...] = ()
    capabilities: tuple[Capability, ...] = ()
    license: str | None = None
    compatibility: str | None = None
    homepage: str | None = None
    when_to_use: str | None = None
    argument_hint: str | None = None
    user_invocable: bool = True
    model_invocable: bool = True  # False: ``disable-model-invocation``
    always: bool = False  # OpenClaw: always included, requirements not checked
    skill_key: str | None = None
    primary_env: str | None = None
    emoji: str | None = None
    command_dispatch: str | None = None
    command_tool: str | None = None
    command_arg_mode: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    frontmatter: Mapping[str, Any] = field(default_factory=dict)  # as read, JSON-safe
    body_line: int = 1  # line of SKILL.md where the body starts
    warnings: tuple[Issue, ...] = ()

    @property
    def folder_name(self) -> str:
        return self.base_dir.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "path": str(self.path),
            "base_dir": str(self.base_dir),
            "root": self.root,
            "dialect": self.dialect.value,
            "dialects": [d.value for d in self.dialects],
            "trust": self.trust.value,
            "tags": list(self.tags),
            "tools": list(self.tools),
            "parameters": [p.to_dict() for p in self.parameters],
            "triggers": [t.to_dict() for t in self.triggers],
            "activation": self.activation.to_dict(),
            "requires": self.requires.to_dict(),
            "capabilities": [c.to_dict() for c in self.capabilities],
            "user_invocable": self.user_invocable,
            "model_invocable": self.model_invocable,
            "always": self.always,
            "homepage": self.homepage,
            "license": self.license,
            "content_hash": self.content_hash,
            "warnings": [str(w) for w in self.warnings],
        }
