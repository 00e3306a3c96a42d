"""The Agent Skills specification (agentskills.io) as its reference validator applies it.

``check_spec`` answers one question about one SKILL.md: would ``skills-ref validate`` (the
spec's reference library) accept it, and if not, why. Its verdict is the reference's, rule for
rule (``tests/skills/test_agentskills_spec.py`` compares the two case by case and over generated
frontmatters); what the spec's text asks and the reference does not check is a warning, never
part of the verdict:

========================  =====================================================================
error                     when
========================  =====================================================================
``frontmatter``           the file does not start with ``---``, or the block is never closed
``yaml``                  the block is not YAML in the reference's strict reading: flow
                          collections (``[a, b]``, ``{a: b}``), anchors, aliases, tags and
                          duplicate keys are refused, as strictyaml refuses them
``mapping``               the block is not a mapping of keys to values
``fields``                a key outside name, description, license, compatibility, metadata,
                          allowed-tools (a client's own keys belong under ``metadata``)
``name``                  missing, empty, over 64 characters (after NFKC), not lowercase,
                          a leading, trailing or double ``-``, a character that is neither a
                          letter, a digit nor ``-`` (Unicode letters are allowed)
``name-folder``           the name differs from its folder's (both NFKC)
``description``           missing, empty, over 1024 characters
``compatibility``         not text, or over 500 characters
========================  =====================================================================

Warnings (the spec's text says so; the reference accepts it): an empty ``compatibility``,
``metadata`` that is not a map of strings to strings, ``allowed-tools`` that is neither a string
nor a list of strings.

Scalars are read as text, as written (``name: 123`` is the name ``"123"``, ``name: true`` the
name ``"true"``), since the reference reads YAML without types. Pure: bytes in, findings out.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import yaml

__all__ = [
    "SpecFinding",
    "check_spec",
    "normalize_name",
    "name_problems",
    "is_spec_name",
    "SPEC_FIELDS",
    "MAX_NAME_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_COMPATIBILITY_CHARS",
]

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
SPEC_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
# PyYAML's own scanner, not libyaml's: libyaml takes a tab after "key:", which the reference
# (and PyYAML) refuse.
_LOADER: Any = yaml.SafeLoader
_MAX_EVENTS = 20_000  # as many values as the loader reads from a frontmatter (frontmatter.py)


@dataclass(frozen=True, kw_only=True, slots=True)
class SpecFinding:
    """One thing the spec forbids (``severity="error"``) or advises against (``"warning"``)."""

    rule: str
    message: str
    severity: Literal["error", "warning"] = "error"
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.message} [agentskills {self.rule}]"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "severity": self.severity, "line": self.line}


def normalize_name(raw: str) -> str:
    """A name as the spec compares it: surrounding space removed, then NFKC."""
    return unicodedata.normalize("NFKC", raw.strip())


def name_problems(name: str) -> list[str]:
    """What breaks the spec's name rules in ``name`` (already normalized); empty when none."""
    problems = []
    if len(name) > MAX_NAME_CHARS:
        problems.append(f"the name is {len(name)} characters; at most {MAX_NAME_CHARS}")
    if name != name.lower():
        problems.append("the name must be lowercase")
    if name.startswith("-") or name.endswith("-"):
        problems.append("the name must not start or end with '-'")
    if "--" in name:
        problems.append("the name must not hold '--'")
    if not all(c.isalnum() or c == "-" for c in name):
        problems.append("the name may hold only letters, digits and '-'")
    return problems


def is_spec_name(name: str) -> bool:
    return bool(name) and name == normalize_name(name) and not name_problems(name)


def check_spec(data: bytes | str, *, folder: str) -> tuple[SpecFinding, ...]:
    """Every finding of the spec's rules on one SKILL.md whose folder is named ``folder``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        return (SpecFinding(rule="frontmatter", message=f"the file is not UTF-8 text (byte {exc.start})"),)
    lines = text.split("\n")
    if not lines[0].startswith("---"):
        why = " (it starts with a byte order mark)" if text.startswith("\ufeff") else ""
        return (SpecFinding(rule="frontmatter", message=f"the file must start with YAML frontmatter ('---'){why}", line=1),)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r").rstrip() in ("---",)), None)
    if lines[0].rstrip("\r").rstrip() != "---" or end is None:
        return (SpecFinding(rule="frontmatter", message="the frontmatter is not closed by a line '---'", line=1),)
    block = "\n".join(line.rstrip("\r") for line in lines[1:end])
    try:
        fields = _StrictView(block).read()
    except _Refused as refused:
        return (SpecFinding(rule="yaml", message=refused.message, line=refused.line + 2 if refused.line is not None else None),)
    if not isinstance(fields, dict):
        return (SpecFinding(rule="mapping", message="the frontmatter must be a YAML mapping of keys to values", line=2),)
    return tuple(_field_findings(fields, folder))


def _field_findings(fields: dict[str, Any], folder: str) -> Iterator[SpecFinding]:
    extra = sorted(set(fields) - SPEC_FIELDS)
    if extra:
        yield SpecFinding(
            rule="fields",
            message=f"fields outside the spec: {', '.join(extra)} (allowed: {', '.join(sorted(SPEC_FIELDS))}; "
            "a client's own fields go under metadata)",
        )
    yield from _name_findings(fields, folder)
    description = fields.get("description")
    if "description" not in fields:
        yield SpecFinding(rule="description", message="the required field description is missing")
    elif not isinstance(description, str) or not description.strip():
        yield SpecFinding(rule="description", message="description must be non-empty text")
    elif len(description) > MAX_DESCRIPTION_CHARS:
        yield SpecFinding(rule="description", message=f"description is {len(description)} characters; at most {MAX_DESCRIPTION_CHARS}")
    if "compatibility" in fields:
        compatibility = fields["compatibility"]
        if not isinstance(compatibility, str):
            yield SpecFinding(rule="compatibility", message="compatibility must be text")
        elif len(compatibility) > MAX_COMPATIBILITY_CHARS:
            yield SpecFinding(
                rule="compatibility", message=f"compatibility is {len(compatibility)} characters; at most {MAX_COMPATIBILITY_CHARS}"
            )
        elif not compatibility:
            yield SpecFinding(rule="compatibility", severity="warning", message="compatibility is empty; the spec asks for 1-500 characters")
    metadata = fields.get("metadata")
    if "metadata" in fields and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        yield SpecFinding(rule="metadata", severity="warning", message="metadata should map keys to text values (the spec's map of strings)")
    tools = fields.get("allowed-tools")
    if "allowed-tools" in fields and not (isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))):
        yield SpecFinding(rule="allowed-tools", severity="warning", message="allowed-tools should be a space-separated string or a list of strings")


def _name_findings(fields: dict[str, Any], folder: str) -> Iterator[SpecFinding]:
    raw = fields.get("name")
    if "name" not in fields:
        yield SpecFinding(rule="name", message="the required field name is missing")
        return
    if not isinstance(raw, str) or not raw.strip():
        yield SpecFinding(rule="name", message="name must be non-empty text")
        return
    name = normalize_name(raw)
    for problem in name_problems(name):
        yield SpecFinding(rule="name", message=f"{name!r}: {problem}")
    if unicodedata.normalize("NFKC", folder) != name:
        yield SpecFinding(rule="name-folder", message=f"the name {name!r} must equal its folder's name {folder!r}")


class _Refused(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class _StrictView:
    """The frontmatter read as the reference reads it: every scalar as its text, and the YAML it
    refuses (flow collections, anchors, aliases, tags, duplicate keys) refused with the line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.events: Iterator[Any] = iter(())
        self.count = 0

    def read(self) -> Any:
        try:
            self.events = iter(yaml.parse(self.text, Loader=_LOADER))
            self._expect(yaml.StreamStartEvent)
            event = self._next()
            if isinstance(event, yaml.StreamEndEvent):
                return ""  # an empty block: no mapping
            if not isinstance(event, yaml.DocumentStartEvent):
                raise _Refused("the frontmatter is not one YAML document", _line(event))
            value = self._value(self._next())
            self._expect(yaml.DocumentEndEvent)
            if not isinstance(self._next(), yaml.StreamEndEvent):
                raise _Refused("the frontmatter holds more than one YAML document", None)
            return value
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise _Refused(f"the frontmatter is not valid YAML: {exc.problem or exc.context}", mark.line if mark else None) from None
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise _Refused(f"the frontmatter is not valid YAML: {exc}", None) from None

    def _next(self) -> Any:
        self.count += 1
        if self.count > _MAX_EVENTS:
            raise _Refused(f"the frontmatter holds more than {_MAX_EVENTS} values", None)
        return next(self.events)

    def _expect(self, kind: type) -> None:
        event = self._next()
        if not isinstance(event, kind):
            raise _Refused("the frontmatter is not one YAML document", _line(event))

    def _value(self, event: Any) -> Any:
        if isinstance(event, yaml.AliasEvent):
            raise _Refused("YAML aliases are not allowed (the reference refuses anchors and aliases)", _line(event))
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"the YAML anchor &{event.anchor} is not allowed (the reference refuses anchors)", _line(event))
        if getattr(event, "tag", None) is not None:
            raise _Refused(f"the YAML tag {event.tag} is not allowed (the reference refuses tags)", _line(event))
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)) and event.flow_style:
            shape = "[...]" if isinstance(event, yaml.SequenceStartEvent) else "{...}"
            raise _Refused(
                f"YAML flow style ({shape}) is not allowed (the reference refuses it): write one '- item' or 'key: value' per line",
                _line(event),
            )
        if isinstance(event, yaml.ScalarEvent):
            return event.value
        if isinstance(event, yaml.SequenceStartEvent):
            items = []
            while not isinstance(item := self._next(), yaml.SequenceEndEvent):
                items.append(self._value(item))
            return items
        if isinstance(event, yaml.MappingStartEvent):
            mapping: dict[str, Any] = {}
            while not isinstance(key_event := self._next(), yaml.MappingEndEvent):
                key = self._value(key_event)
                if not isinstance(key, str):
                    raise _Refused("a key of the frontmatter is a list or a mapping", _line(key_event))
                if key in mapping:
                    raise _Refused(f"the key {key!r} appears twice (the reference refuses duplicate keys)", _line(key_event))
                mapping[key] = self._value(self._next())
            return mapping
        raise _Refused("the frontmatter is not one YAML document", _line(event))


def _line(event: Any) -> int | None:
    mark = getattr(event, "start_mark", None)
    return mark.line if mark is not None else None
