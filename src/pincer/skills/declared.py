"""Declared capabilities: ``## capability: NAME`` sections, ``capabilities`` in the frontmatter and
a ``capabilities.json`` beside SKILL.md, merged into :class:`Capability` values (later
declarations fill in and override earlier ones: a section names the inputs, the frontmatter or
capabilities.json adds the command and effects)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pincer.skills.model import Capability, Field
from pincer.skills.reader import MAX_LIST_ITEMS, FieldReader, kind_of, param_type

__all__ = ["read_capabilities"]

_CAPABILITY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def read_capabilities(
    reader: FieldReader,
    fm: Mapping[str, Any],
    sections: list[dict[str, Any]],
    capabilities_json: bytes | None,
) -> tuple[Capability, ...]:
    """The skill's capabilities, in declaration order; malformed entries become warnings."""
    declared: dict[str, dict[str, Any]] = {}

    def merge(entries: list[tuple[str, Any]]) -> None:
        # Later declarations fill in and override earlier ones: a section names the inputs,
        # the frontmatter or capabilities.json adds the command and effects.
        for key, entry in entries:
            if not isinstance(entry, dict):
                reader.warn(key, f"expected a mapping, got {kind_of(entry)}; ignored")
                continue
            name = entry.get("name")
            if not isinstance(name, str) or not _CAPABILITY_NAME.match(name):
                reader.warn(key, f"{str(name)[:40]!r} is not a capability name (a letter, then letters, digits, _ or -)")
                continue
            target = declared.setdefault(name, {"name": name})
            target.update({k: v for k, v in entry.items() if v not in (None, "", [], {})})

    merge([(f"capability {s['name']}", s) for s in sections])
    merge(_entries(reader, fm.get("capabilities"), "capabilities"))
    if capabilities_json is not None:
        try:
            decoded = json.loads(capabilities_json.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            reader.warn("capabilities.json", f"is not valid JSON ({exc}); ignored")
            decoded = None
        if isinstance(decoded, dict) and "capabilities" in decoded:
            decoded = decoded["capabilities"]
        if decoded is not None:
            merge(_entries(reader, decoded, "capabilities.json"))
    return tuple(_capability(reader, entry) for entry in declared.values())


def _entries(reader: FieldReader, raw: Any, key: str) -> list[tuple[str, Any]]:
    if raw is None:
        return []
    if isinstance(raw, list):
        return [(f"{key}.{i}", item) for i, item in enumerate(raw[:MAX_LIST_ITEMS])]
    if isinstance(raw, dict):
        return [(f"{key}.{k}", {"name": k, **v} if isinstance(v, dict) else v) for k, v in list(raw.items())[:MAX_LIST_ITEMS]]
    reader.warn(key, f"expected a list or mapping of capabilities, got {kind_of(raw)}; ignored")
    return []


def _capability(reader: FieldReader, entry: Mapping[str, Any]) -> Capability:
    name = entry["name"]
    key = f"capabilities.{name}"
    command = entry.get("command")
    argv: tuple[str, ...] = ()
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        argv = tuple(command)
    elif isinstance(command, str) and command.strip():
        argv = tuple(command.split())
    elif command is not None:
        reader.warn(key + ".command", "expected an argv list of strings; ignored")
    network = entry.get("network", "none")
    if network not in ("none", "allowlist", "host"):
        reader.warn(key + ".network", f"{str(network)[:20]!r} is not none|allowlist|host; none is used")
        network = "none"
    timeout = entry.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        reader.warn(key + ".timeout_s", "expected a positive number of seconds; ignored")
        timeout = None
    description = entry.get("description")
    return Capability(
        name=name,
        description=description if isinstance(description, str) else "",
        inputs=_fields(reader, entry.get("inputs"), key + ".inputs"),
        outputs=_fields(reader, entry.get("outputs"), key + ".outputs"),
        command=argv,
        effects=reader.strings(entry, "effects", where=key + "."),
        network=str(network),
        allow_hosts=reader.strings(entry, "allow_hosts", where=key + "."),
        timeout_s=float(timeout) if timeout is not None else None,
    )


def _fields(reader: FieldReader, raw: Any, key: str) -> tuple[Field, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        raw = [{"name": k, **v} if isinstance(v, dict) else {"name": k, "type": v} for k, v in raw.items()]
    if not isinstance(raw, list):
        reader.warn(key, f"expected a list of fields, got {kind_of(raw)}; ignored")
        return ()
    fields: dict[str, Field] = {}
    for index, item in enumerate(raw[:MAX_LIST_ITEMS]):
        if isinstance(item, Field):
            fields.setdefault(item.name, item)
            continue
        if isinstance(item, str):
            item = {"name": item}
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not _PARAM_NAME.match(name):
            reader.warn(f"{key}.{index}", f"{str(name)[:40]!r} is not a field name; ignored")
            continue
        assert isinstance(item, dict)
        description = item.get("description")
        fields.setdefault(
            name,
            Field(
                name=name,
                type=param_type(reader, item.get("type"), f"{key}.{index}.type"),
                description=description if isinstance(description, str) else "",
                required=item.get("required") is True,
            ),
        )
    return tuple(fields.values())
