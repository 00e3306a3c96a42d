"""The shape every built-in shares: one tool, many actions, chosen by an ``action`` argument.

IronClaw's pattern (``{"action": "create_issue", "owner": ..., ...}``): one input schema with an
``action`` enum and the union of the actions' fields (each field one type across actions), plus
one ``if action = X then required [...]`` clause per action, so the chain's JSON Schema check
refuses a call missing a field its action needs. Each action declares whether it writes: a read
has ``network`` + ``use_secret``, a write adds ``external_write``; the table of those sets is the
spec's per-call effects, so a grant can allow reads and leave writes asking.

Narrowing (GitHub's MCP server does the same): ``actions = [...]`` keeps the named ones,
``toolsets = [...]`` the actions of those families, and ``read_only = true`` drops every write
whatever else is set, so an agent that only reads never sees a write action's definition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pincer.core.effects import EffectKind
from pincer.core.errors import ArgumentsInvalid, UsageError

__all__ = ["Action", "ActionSet", "READ_EFFECTS", "WRITE_EFFECTS", "select_actions"]

READ_EFFECTS = frozenset({EffectKind.NETWORK, EffectKind.USE_SECRET})
WRITE_EFFECTS = READ_EFFECTS | {EffectKind.EXTERNAL_WRITE}

Handler = Callable[[Any, Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One action of a built-in: its fields (names from the tool's field table), which of them it
    needs, whether it writes, the toolset it belongs to, and the coroutine that carries it out
    (``handler(api, args)``; ``api`` is the tool's egress client for this call)."""

    name: str
    description: str
    toolset: str
    handler: Handler = field(repr=False, compare=False)
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    writes: bool = False
    effects: frozenset[EffectKind] | None = None  # None: READ_EFFECTS or WRITE_EFFECTS by ``writes``

    @property
    def call_effects(self) -> frozenset[EffectKind]:
        if self.effects is not None:
            return self.effects
        return WRITE_EFFECTS if self.writes else READ_EFFECTS

    @property
    def fields(self) -> tuple[str, ...]:
        return self.required + self.optional


def select_actions(
    actions: Sequence[Action],
    *,
    tool: str,
    names: Sequence[str] | None = None,
    toolsets: Sequence[str] | None = None,
    read_only: bool = False,
) -> tuple[Action, ...]:
    """The actions a configuration leaves (see the module docstring). An unknown action or
    toolset name is a UsageError naming the config key and the known names."""
    known = {a.name for a in actions}
    known_sets = sorted({a.toolset for a in actions})
    if names is not None:
        unknown = sorted(set(names) - known)
        if unknown:
            raise UsageError(
                f"[builtins.{tool}] actions names unknown action(s): {', '.join(unknown)}",
                hint=f"set [builtins.{tool}] actions in config.toml to some of: {', '.join(sorted(known))}",
            )
    if toolsets is not None:
        unknown = sorted(set(toolsets) - set(known_sets))
        if unknown:
            raise UsageError(
                f"[builtins.{tool}] toolsets names unknown toolset(s): {', '.join(unknown)}",
                hint=f"set [builtins.{tool}] toolsets in config.toml to some of: {', '.join(known_sets)}",
            )
    chosen = []
    for action in actions:
        if names is not None and action.name not in names:
            continue
        if toolsets is not None and action.toolset not in toolsets:
            continue
        if read_only and action.writes:
            continue  # read_only wins over actions and toolsets
        chosen.append(action)
    return tuple(chosen)


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionSet:
    """The actions one tool offers after narrowing, with the field table they draw on."""

    tool: str
    actions: tuple[Action, ...]
    fields: Mapping[str, Mapping[str, Any]]  # field name -> its JSON Schema

    def __post_init__(self) -> None:
        for action in self.actions:
            missing = [f for f in action.fields if f not in self.fields]
            if missing:
                raise UsageError(f"{self.tool}.{action.name}: fields without a schema: {', '.join(missing)}")

    def get(self, name: str) -> Action | None:
        return next((a for a in self.actions if a.name == name), None)

    @property
    def effects(self) -> frozenset[EffectKind]:
        """The union of every action's effects: what the tool as a whole may do."""
        found: set[EffectKind] = set()
        for action in self.actions:
            found |= action.call_effects
        return frozenset(found)

    @property
    def effects_table(self) -> dict[str, frozenset[EffectKind]]:
        return {a.name: a.call_effects for a in self.actions}

    @property
    def writes(self) -> bool:
        return any(a.writes for a in self.actions)

    def input_schema(self) -> dict[str, Any]:
        """The action-tagged schema: an ``action`` enum, the union of fields, required per action."""
        used = sorted({f for a in self.actions for f in a.fields})
        lines = [f"- {a.name}: {a.description}" for a in self.actions]
        properties: dict[str, Any] = {
            "action": {
                "type": "string",
                "enum": [a.name for a in self.actions],
                "description": "What to do:\n" + "\n".join(lines),
            }
        }
        properties.update({name: dict(self.fields[name]) for name in used})
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": ["action"],
            "additionalProperties": False,
        }
        if len(self.actions) == 1:
            # One action: naming it would be noise; the call may leave it out.
            properties["action"]["default"] = self.actions[0].name
            schema["required"] = list(self.actions[0].required)
            return schema
        clauses = [
            {
                "if": {"properties": {"action": {"const": a.name}}, "required": ["action"]},
                "then": {"required": list(a.required)},
            }
            for a in self.actions
            if a.required
        ]
        if clauses:
            schema["allOf"] = clauses
        return schema

    def resolve(self, args: Mapping[str, Any]) -> tuple[Action, dict[str, Any]]:
        """The action a call names and its own fields; ArgumentsInvalid for an action this tool
        does not offer (also one narrowed away) or a field that action does not take."""
        name = args.get("action")
        if name is None and len(self.actions) == 1:
            name = self.actions[0].name
        action = self.get(name) if isinstance(name, str) else None
        if action is None:
            offered = ", ".join(a.name for a in self.actions) or "none"
            raise ArgumentsInvalid(
                f"{self.tool}: action {name!r} is not offered (offered: {offered})",
                hint=f"pick one of the offered actions; [builtins.{self.tool}] in config.toml narrows them",
            )
        extra = sorted(k for k in args if k != "action" and k not in action.fields)
        if extra:
            raise ArgumentsInvalid(
                f"{self.tool}.{action.name} does not take: {', '.join(extra)}",
                hint=f"it takes: {', '.join(action.fields) or 'no fields'}",
            )
        missing = [f for f in action.required if f not in args]
        if missing:
            raise ArgumentsInvalid(
                f"{self.tool}.{action.name} needs: {', '.join(missing)}",
                hint=f"see the input schema with `pincer tools show {self.tool}`",
            )
        return action, {k: v for k, v in args.items() if k != "action"}


def names_of(actions: Iterable[Action]) -> list[str]:
    return [a.name for a in actions]
