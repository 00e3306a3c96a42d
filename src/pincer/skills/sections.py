"""What the loader reads out of a SKILL.md body: the first paragraph (the description of a file
without frontmatter) and the seed document's ``## capability: NAME`` sections.

    ## capability: word_count
    Count the words of a text.

    ### Inputs
    - text (string, required): the text to count
    - unique (boolean): count distinct words only

    ### Outputs
    - count (integer): how many words

``Inputs:`` / ``**Inputs**`` lines work as headings too; a field line is ``- name (type[,
required]): description`` or ``- name: type - description``.
"""

from __future__ import annotations

import re
from typing import Any

from pincer.skills.model import Field, ParamType

__all__ = ["capability_sections", "first_paragraph"]

_CAPABILITY = re.compile(r"^#{2,3}\s*capability\s*:\s*`?(?P<name>[A-Za-z][A-Za-z0-9_-]{0,63})`?\s*$", re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s")
_LIST_HEADING = re.compile(r"^(?:#{2,6}\s*|\*\*)?(?P<which>inputs?|outputs?)(?:\*\*)?\s*:?\s*(?:\*\*)?\s*$", re.IGNORECASE)
_FIELD = re.compile(
    r"^\s*[-*+]\s+`?(?P<name>[A-Za-z_][A-Za-z0-9_]{0,63})`?\s*"
    r"(?:\((?P<meta>[^)]{0,80})\))?\s*(?:[:\u2014\u2013-]\s*(?P<rest>.*))?$"
)
_TYPES = {t.value for t in ParamType} | {"str", "int", "float", "bool", "list", "dict"}
_ALIASES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}
_MAX_FIELD_LINES = 256


def first_paragraph(body: str, *, limit: int = 1024) -> str:
    """The first paragraph of prose: headings, code fences, rules and blank lines skipped."""
    lines: list[str] = []
    fenced = False
    for raw in body.split("\n"):
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            if lines:
                break
            fenced = not fenced
            continue
        if fenced:
            continue
        if not line:
            if lines:
                break
            continue
        if _HEADING.match(line) or line in ("---", "***", "___") or line.startswith("<!--"):
            if lines:
                break
            continue
        lines.append(line)
        if sum(len(x) for x in lines) > limit:
            break
    return " ".join(lines)[:limit]


def capability_sections(body: str) -> list[dict[str, Any]]:
    """Each ``## capability: NAME`` section as {name, description, inputs, outputs}."""
    if "apabilit" not in body:
        return []
    sections: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    target: str | None = None
    prose: list[str] = []
    fenced = False
    for raw in body.split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        match = _CAPABILITY.match(line.strip())
        if match:
            if current is not None:
                current["description"] = " ".join(prose).strip()
                sections.append(current)
            current = {"name": match.group("name"), "inputs": [], "outputs": []}
            target, prose = None, []
            continue
        if current is None:
            continue
        stripped = line.strip()
        heading = _LIST_HEADING.match(stripped)
        if heading:
            target = "inputs" if heading.group("which").lower().startswith("in") else "outputs"
            continue
        if stripped.startswith(("## ", "# ")):
            current["description"] = " ".join(prose).strip()
            sections.append(current)
            current, target, prose = None, None, []
            continue
        if target is not None:
            parsed = _field(stripped)
            if parsed is not None and len(current[target]) < _MAX_FIELD_LINES:
                current[target].append(parsed)
            continue
        if stripped and sum(len(p) for p in prose) <= 1024:
            prose.append(stripped)
    if current is not None:
        current["description"] = " ".join(prose).strip()
        sections.append(current)
    return sections


def _field(line: str) -> Field | None:
    match = _FIELD.match(line)
    if not match:
        return None
    kind = ParamType.STRING
    required = False
    meta = match.group("meta") or ""
    rest = (match.group("rest") or "").strip()
    for word in (w.strip().lower() for w in meta.split(",")):
        if word in _TYPES:
            kind = ParamType(_ALIASES.get(word, word))
        elif word == "required":
            required = True
    if not meta and rest:
        parts = re.split(r"\s+[\u2014\u2013-]\s+", rest, maxsplit=1)
        words = [w.strip().lower() for w in parts[0].split(",")]
        if words[0] in _TYPES:
            kind = ParamType(_ALIASES.get(words[0], words[0]))
            required = "required" in words[1:]
            rest = parts[1].strip() if len(parts) > 1 else ""
    return Field(name=match.group("name"), type=kind, description=rest, required=required)
