"""Definition pinning: what each server's tools looked like when they were trusted.

A server's tool is pinned the first time pincer sees it (adding a server is the act of trusting
it). A pin is keyed by the tool's *upstream* name (what the server calls it) and records:

* the registry name the tool got (``{server}_{tool}``, sanitized), which it keeps: when two
  upstream names map to one registry name (``a.b`` and ``a_b`` both become ``srv_a_b``), the
  pinned one keeps it whatever order the server lists them in (:mod:`.assignment`);
* the definition an agent sees (name, description, input schema) and its hash;
* the annotations that decide the tool's effects (``readOnlyHint``, ``destructiveHint``,
  ``openWorldHint``, see :mod:`.tools`) and their policy hash, so the policy in force is the
  pinned one: a server that starts calling a tool read-only changes the tool as much as one
  that rewrites its description.

When the server later offers something else under a pinned name, or a different upstream tool
under a pinned registry name, the tool is blocked and keeps being shown with its pinned
definition (a changed description is exactly where a hostile server would put new instructions
for the agent) until someone re-trusts it with ``pincer mcp trust``, which shows the difference.

The pins live in ``$PINCER_HOME/mcp/pins.json`` next to the server list; they also let a lazy
server's tools be registered before the server has ever been started in this process. Pins
written before the registry name and policy hash were recorded are read as they are: the
registry name is derived, the policy hash computed from the pinned annotations.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.core.errors import ConfigError
from pincer.core.values import definition_hash, policy_hash
from pincer.runtimes.mcp.config import tool_name
from pincer.store.jsonfile import locked, read_json, write_json_atomic

logger = logging.getLogger(__name__)

__all__ = ["ToolDefinition", "Pin", "PinStore", "PINS_FILE", "EFFECT_HINTS", "describe_change"]

PINS_FILE = Path("mcp") / "pins.json"
SCHEMA_VERSION = 1
# The annotations the effects table reads (tools.py): part of the pin, because they decide policy.
EFFECT_HINTS = ("readOnlyHint", "destructiveHint", "openWorldHint")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """A tool as its server describes it (upstream name, not yet prefixed)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    # The tool's ``_meta`` (an MCP App's ``ui``): shown to clients, kept in the pin so a lazy
    # server's App is known before it starts, but not compared (it decides no policy: the App's
    # page is read through the chain like any resource).
    meta: Mapping[str, Any] | None = None

    @property
    def hash(self) -> str:
        return definition_hash(self.name, self.description, self.input_schema)

    @property
    def effect_hints(self) -> dict[str, Any]:
        """The annotations that decide effects, as the server sent them."""
        return {key: self.annotations[key] for key in EFFECT_HINTS if key in self.annotations}

    @property
    def policy_hash(self) -> str:
        """The server-controlled part of the tool's policy: its name and its effect hints."""
        return policy_hash(
            name=self.name, effects=frozenset(), side_effecting=False, capabilities=None, annotations=self.effect_hints
        )

    def public_json(self) -> dict[str, Any]:
        """Everything of the definition that reaches an agent or a person (what is leak-scanned)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
            "meta": self.meta,
        }

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "hash": self.hash,
            "policy_hash": self.policy_hash,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        if self.output_schema is not None:
            data["output_schema"] = dict(self.output_schema)
        if self.title:
            data["title"] = self.title
        if self.meta:
            data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> ToolDefinition:
        return cls(
            name=name,
            description=str(data.get("description") or ""),
            input_schema=dict(data.get("input_schema") or {"type": "object"}),
            annotations=dict(data.get("annotations") or {}),
            output_schema=dict(data["output_schema"]) if isinstance(data.get("output_schema"), Mapping) else None,
            title=data.get("title") if isinstance(data.get("title"), str) else None,
            meta=dict(data["meta"]) if isinstance(data.get("meta"), Mapping) else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """A trusted definition and the hashes recorded with it (what offered definitions must
    match), and the registry name the tool holds."""

    definition: ToolDefinition
    hash: str
    policy_hash: str
    registry_name: str
    trusted_at: float

    @property
    def upstream(self) -> str:
        return self.definition.name

    def matches(self, offered: ToolDefinition) -> bool:
        """The same upstream tool with the same definition and the same effect hints."""
        return (
            offered.name == self.definition.name
            and offered.hash == self.hash
            and offered.policy_hash == self.policy_hash
        )


def describe_change(old: ToolDefinition, new: ToolDefinition) -> str:
    """A unified diff of what decides the tool: its upstream name, description, input schema and
    the annotations that decide its effects."""

    def lines(d: ToolDefinition) -> list[str]:
        shown = {
            "upstream_name": d.name,
            "description": d.description,
            "input_schema": d.input_schema,
            "effect_annotations": d.effect_hints,
        }
        text = json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False, default=str)
        return text.splitlines(keepends=True)

    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile="trusted", tofile="offered now"))


class PinStore:
    """Reads are cached by file modification time, so a trust given by another process (the CLI
    beside a running gateway) is seen on the next look."""

    def __init__(self, home: Path) -> None:
        self.path = home / PINS_FILE
        self._cache: dict[str, dict[str, Pin]] = {}
        self._stamp: tuple[int, int] | None = None

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> dict[str, dict[str, Pin]]:
        stamp = self._file_stamp()
        if stamp is not None and stamp == self._stamp:
            return self._cache
        raw = read_json(self.path, default={}) or {}
        if not isinstance(raw, Mapping) or not isinstance(raw.get("servers", {}), Mapping):
            raise ConfigError(f"{self.path}: expected an object with 'servers'", hint="remove the file to re-pin")
        pins: dict[str, dict[str, Pin]] = {}
        for server, tools in raw.get("servers", {}).items():
            if not isinstance(tools, Mapping):
                continue
            entries: dict[str, Pin] = {}
            for name, data in tools.items():
                if not isinstance(data, Mapping):
                    continue
                definition = ToolDefinition.from_json(str(name), data)
                # A hand-edited definition without matching hashes must not become a silent
                # trust: the recorded hashes stay what offered definitions are compared with.
                recorded = data.get("hash")
                pin_hash = recorded if isinstance(recorded, str) and recorded else definition.hash
                recorded_policy = data.get("policy_hash")
                pin_policy = (
                    recorded_policy if isinstance(recorded_policy, str) and recorded_policy else definition.policy_hash
                )
                entries[str(name)] = Pin(
                    definition=definition,
                    hash=pin_hash,
                    policy_hash=pin_policy,
                    # Registry names are derived, never chosen by the file: an edited one would
                    # let a pin claim a name outside its server's prefix.
                    registry_name=tool_name(str(server), str(name)),
                    trusted_at=_number(data.get("trusted_at")),
                )
            pins[str(server)] = entries
        self._cache, self._stamp = pins, stamp
        return pins

    def pins(self, server: str) -> dict[str, Pin]:
        """The pins of one server, by upstream name."""
        return dict(self._load().get(server, {}))

    def all(self) -> dict[str, dict[str, Pin]]:
        """Every server's pins (registry names are claimed across servers)."""
        return {server: dict(pins) for server, pins in self._load().items()}

    def record_new(self, server: str, definitions: Iterable[ToolDefinition]) -> list[str]:
        """Pin the tools seen for the first time; returns their upstream names. A tool whose
        registry name another pin already holds (another upstream name of this server that maps
        to the same name, or another server's tool) is not pinned: the pinned one keeps it."""
        definitions = list(definitions)
        with locked(self.path):
            self._stamp = None
            current = self._load()
            known = current.get(server, {})
            claimed = {pin.registry_name for pins in current.values() for pin in pins.values()}
            new: dict[str, ToolDefinition] = {}
            for definition in definitions:
                name = tool_name(server, definition.name)
                if definition.name in known or definition.name in new or name in claimed:
                    continue
                claimed.add(name)
                new[definition.name] = definition
            if new:
                self._update(server, new)
        return list(new)

    def trust(self, server: str, definitions: Iterable[ToolDefinition]) -> None:
        """Pin exactly these definitions, replacing earlier pins of the same upstream names and
        of other upstream names of this server that held the same registry names."""
        chosen = {d.name: d for d in definitions}
        names = {tool_name(server, upstream) for upstream in chosen}
        with locked(self.path):
            self._stamp = None
            displaced = [
                upstream
                for upstream, pin in self._load().get(server, {}).items()
                if pin.registry_name in names and upstream not in chosen
            ]
            self._update(server, chosen, drop=displaced)

    def forget(self, server: str) -> None:
        with locked(self.path):
            self._stamp = None
            raw = read_json(self.path, default={}) or {}
            servers = dict(raw.get("servers", {}))
            if servers.pop(server, None) is not None:
                write_json_atomic(self.path, {"schema_version": SCHEMA_VERSION, "servers": servers})
            self._stamp = None

    def _update(self, server: str, definitions: Mapping[str, ToolDefinition], *, drop: Iterable[str] = ()) -> None:
        raw = read_json(self.path, default={}) or {}
        servers = dict(raw.get("servers", {}))
        tools = dict(servers.get(server, {}))
        for upstream in drop:
            tools.pop(upstream, None)
        now = time.time()
        for name, definition in definitions.items():
            tools[name] = {**definition.to_json(), "registry_name": tool_name(server, name), "trusted_at": now}
        servers[server] = tools
        write_json_atomic(self.path, {"schema_version": SCHEMA_VERSION, "servers": servers})
        self._stamp = None


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0
