"""Split a docstring into the description an agent reads and per-parameter descriptions.

Understands Google style (``Args:`` / ``Arguments:`` / ``Parameters:`` sections with indented
``name (type): text`` entries and indented continuation lines) and Sphinx ``:param name: text``
fields, which between them cover the docstrings people write for tools.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["ParsedDocstring", "parse_docstring"]

_ARGS_HEADERS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"})
_OTHER_HEADERS = frozenset(
    {
        "returns",
        "return",
        "yields",
        "yield",
        "raises",
        "raise",
        "examples",
        "example",
        "notes",
        "note",
        "attributes",
        "warnings",
        "warning",
        "see also",
        "todo",
        "references",
    }
)
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:[a-z]+")


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedDocstring:
    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """The text before the first section, and ``{param: description}`` from the Args section.

    Never raises: a docstring in a style we do not know simply yields its text as description.
    """
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None  # None: still in the description
    current: str | None = None
    entry_indent = 0
    for line in lines:
        stripped = line.strip()
        header = _HEADER.match(stripped)
        indent = len(line) - len(line.lstrip())
        if header and indent == 0 and header.group(1).lower() in (_ARGS_HEADERS | _OTHER_HEADERS):
            section = header.group(1).lower()
            current = None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            section, current = "sphinx", sphinx.group(1)
            params[current] = [sphinx.group(2)]
            continue
        if _SPHINX_FIELD.match(stripped):
            section, current = "sphinx-other", None
            continue
        if section is None:
            description.append(line)
        elif section in _ARGS_HEADERS:
            entry = _GOOGLE_ENTRY.match(stripped)
            if entry and (current is None or indent <= entry_indent):
                current, entry_indent = entry.group(1), indent
                params[current] = [entry.group(2)]
            elif current is not None and stripped:
                params[current].append(stripped)
        elif section == "sphinx" and current is not None and stripped:
            params[current].append(stripped)
    text = "\n".join(description).strip()
    joined = {name: " ".join(part for part in parts if part).strip() for name, parts in params.items()}
    return ParsedDocstring(description=text, params={k: v for k, v in joined.items() if v})
