"""Definition pinning: what each server's tools looked like when they were trusted.

A server's tool is pinned the first time pincer sees it (adding a server is the act of trusting
it). The pin is the tool's definition — name, description, input schema — and its hash. When
the server later offers a different definition under the same name, the tool is blocked and
keeps being shown with its pinned definition (a changed description is exactly where a hostile
server would put new instructions for the agent) until someone re-trusts it with
``pincer mcp trust``, which shows the difference.

The pins live in ``$PINCER_HOME/mcp/pins.json`` next to the server list; they also let a lazy
server's tools be registered before the server has ever been started in this process.
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
from pincer.core.values import definition_hash
from pincer.store.jsonfile import locked, read_json, write_json_atomic

logger = logging.getLogger(__name__)

__all__ = ["ToolDefinition", "Pin", "PinStore", "PINS_FILE", "describe_change"]

PINS_FILE = Path("mcp") / "pins.json"
SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """A tool as its server describes it (upstream name, not yet prefixed)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None

    @property
    def hash(self) -> str:
        return definition_hash(self.name, self.description, self.input_schema)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "hash": self.hash,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        if self.output_schema is not None:
            data["output_schema"] = dict(self.output_schema)
        if self.title:
            data["title"] = self.title
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
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """A trusted definition and the hash recorded with it (what offered definitions must match)."""

    definition: ToolDefinition
    hash: str
    trusted_at: float


def describe_change(old: ToolDefinition, new: ToolDefinition) -> str:
    """A unified diff of what an agent sees of the tool (description and input schema)."""

    def lines(d: ToolDefinition) -> list[str]:
        text = json.dumps(
            {"description": d.description, "input_schema": d.input_schema}, indent=2, sort_keys=True, ensure_ascii=False
        )
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
                recorded = data.get("hash")
                # A hand-edited definition without a matching hash must not become a silent
                # trust: the recorded hash stays what offered definitions are compared with.
                pin_hash = recorded if isinstance(recorded, str) and recorded else definition.hash
                entries[str(name)] = Pin(
                    definition=definition, hash=pin_hash, trusted_at=float(data.get("trusted_at") or 0)
                )
            pins[str(server)] = entries
        self._cache, self._stamp = pins, stamp
        return pins

    def pins(self, server: str) -> dict[str, Pin]:
        return dict(self._load().get(server, {}))

    def record_new(self, server: str, definitions: Iterable[ToolDefinition]) -> list[str]:
        """Pin the tools that have no pin yet (first sight); returns their names."""
        definitions = list(definitions)
        with locked(self.path):
            self._stamp = None
            current = self._load()
            known = current.get(server, {})
            new = [d for d in definitions if d.name not in known]
            if new:
                self._update(server, {d.name: d for d in new})
        return [d.name for d in new]

    def trust(self, server: str, definitions: Iterable[ToolDefinition]) -> None:
        """Pin exactly these definitions (replacing earlier pins of the same names)."""
        with locked(self.path):
            self._stamp = None
            self._update(server, {d.name: d for d in definitions})

    def forget(self, server: str) -> None:
        with locked(self.path):
            self._stamp = None
            raw = read_json(self.path, default={}) or {}
            servers = dict(raw.get("servers", {}))
            if servers.pop(server, None) is not None:
                write_json_atomic(self.path, {"schema_version": SCHEMA_VERSION, "servers": servers})
            self._stamp = None

    def _update(self, server: str, definitions: Mapping[str, ToolDefinition]) -> None:
        raw = read_json(self.path, default={}) or {}
        servers = dict(raw.get("servers", {}))
        tools = dict(servers.get(server, {}))
        now = time.time()
        for name, definition in definitions.items():
            tools[name] = {**definition.to_json(), "trusted_at": now}
        servers[server] = tools
        write_json_atomic(self.path, {"schema_version": SCHEMA_VERSION, "servers": servers})
        self._stamp = None
