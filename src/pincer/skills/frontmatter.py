"""Split a SKILL.md into frontmatter and body, and read the frontmatter's YAML leniently.

Real SKILL.md files carry YAML a strict parser refuses; the most common case is an unquoted
``: `` inside a one-line value (``description: Use when: ...``). As the Agent Skills client guide
advises, such a file is read again with those values quoted and a warning is attached; it is
never dropped silently. What still cannot be read is a :class:`SkillError` naming the line.

Everything here is pure: text in, values or our error out. YAML aliases are refused (a few
bytes of anchors can expand into an enormous document), and the decoded value is copied into
plain JSON values under a node budget, so no input can make the loader hang or blow up.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml

from pincer.core.errors import SkillError

__all__ = ["Frontmatter", "split_frontmatter", "parse_yaml", "MAX_FRONTMATTER_NODES", "MAX_NESTING"]

MAX_FRONTMATTER_NODES = 20_000
MAX_NESTING = 64
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*$")
_PLAIN_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z0-9_][A-Za-z0-9_.-]*):[ \t]+(?P<value>\S.*)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Frontmatter:
    """The decoded frontmatter (``data`` is None when the file has none) and where the body starts."""

    data: dict[str, Any] | None
    body: str
    body_line: int  # 1-based line of SKILL.md where the body starts
    lenient: bool = False  # read only after quoting values a strict parser refused


def split_frontmatter(text: str, *, source: str) -> Frontmatter:
    """Frontmatter between a first line ``---`` and the next ``---`` (or ``...``) line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r").strip() != "---":
        return Frontmatter(data=None, body=text, body_line=1)
    for index in range(1, len(lines)):
        if _FENCE.match(lines[index].rstrip("\r")):
            yaml_text = "\n".join(line.rstrip("\r") for line in lines[1:index])
            body = "\n".join(lines[index + 1 :])
            data, lenient = parse_yaml(yaml_text, source=source, first_line=2)
            return Frontmatter(data=data, body=body, body_line=index + 2, lenient=lenient)
    raise SkillError(
        "the frontmatter starts with '---' but is never closed",
        source=source,
        line=1,
        hint="end the frontmatter with a line holding only '---'",
    )


def parse_yaml(text: str, *, source: str, first_line: int = 1) -> tuple[dict[str, Any], bool]:
    """Decode the frontmatter mapping; returns (data, read_leniently)."""
    try:
        return _load(text, source=source, first_line=first_line), False
    except SkillError as strict_error:
        quoted = _quote_plain_values(text)
        if quoted == text:
            raise
        try:
            return _load(quoted, source=source, first_line=first_line), True
        except SkillError:
            raise strict_error from None


def _load(text: str, *, source: str, first_line: int) -> dict[str, Any]:
    try:
        # Composed by libyaml (when present) and turned into values here: cheaper than PyYAML's
        # constructor, and the walk sees aliases (a node met twice) and counts every value.
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + mark.line if mark is not None else first_line
        # An unclosed bracket is noticed at the end of the stream: point at the last real line.
        line = min(line, first_line + max(text.rstrip("\n").count("\n"), 0))
        problem = exc.problem or exc.context or "malformed YAML"
        raise SkillError(
            f"the frontmatter is not valid YAML: {problem}",
            source=source,
            line=line,
            hint="quote values that contain ': ' or start with a special character",
        ) from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError, AttributeError) as exc:
        # PyYAML raises plain Python errors for some inputs; all mean the same thing to the user.
        raise SkillError(
            f"the frontmatter is not valid YAML: {type(exc).__name__}: {str(exc)[:200]}",
            source=source,
            line=first_line,
            hint="check the values' syntax",
        ) from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise SkillError(
            f"the frontmatter must be a mapping of keys to values, not a {_NODE_KINDS.get(type(root), 'value')}",
            source=source,
            line=first_line,
            hint="write one 'key: value' per line",
        )
    value = _Walk(source=source, first_line=first_line).value(root, 0)
    assert isinstance(value, dict)
    return value


_NODE_KINDS: dict[type, str] = {yaml.ScalarNode: "single value", yaml.SequenceNode: "list"}
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_YAML_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_YAML_TAG + t for t in ("str", "int", "float", "bool", "null"))


class _Walk:
    """Nodes to plain JSON values under a node budget; aliases and foreign tags refused."""

    def __init__(self, *, source: str, first_line: int) -> None:
        self.source = source
        self.first_line = first_line
        self.budget = MAX_FRONTMATTER_NODES
        self.seen: set[int] = set()

    def _fail(self, node: Any, message: str, hint: str) -> SkillError:
        mark = getattr(node, "start_mark", None)
        line = self.first_line + mark.line if mark is not None else None
        return SkillError(message, source=self.source, line=line, hint=hint)

    def value(self, node: Any, depth: int) -> Any:
        self.budget -= 1
        if self.budget < 0 or depth > MAX_NESTING:
            raise SkillError(
                f"the frontmatter is too large or too deeply nested (more than {MAX_FRONTMATTER_NODES} values "
                f"or {MAX_NESTING} levels)",
                source=self.source,
                hint="frontmatter holds metadata; move long content into the body or a file",
            )
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if id(node) in self.seen:
            raise self._fail(
                node,
                "the frontmatter uses YAML anchors or aliases, which skills do not allow",
                "write the value out instead of referring to an anchor",
            )
        self.seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            return [self.value(child, depth + 1) for child in node.value]
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            result[_key(self.value(key_node, depth + 1))] = self.value(value_node, depth + 1)
        return result

    def _scalar(self, node: Any) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        try:
            if tag == _INT:
                return _CONSTRUCTOR.construct_yaml_int(node)
            if tag == _FLOAT:
                number = _CONSTRUCTOR.construct_yaml_float(node)
                return number if math.isfinite(number) else node.value
            if tag == _BOOL:
                return _CONSTRUCTOR.construct_yaml_bool(node)
            if tag == _NULL:
                return None
        except (ValueError, TypeError, OverflowError) as exc:
            raise self._fail(node, f"the frontmatter holds a value YAML cannot read ({exc})", "quote it") from None
        if tag.startswith(_YAML_TAG):
            return node.value  # timestamps, binary, ...: the text as written
        raise self._fail(node, f"the frontmatter uses the YAML tag {tag[:60]!r}, which skills do not allow", "remove the tag")


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, (dt.date, dt.datetime)):
        return key.isoformat()
    return str(key) if not isinstance(key, str) else key


def _quote_plain_values(text: str) -> str:
    """Quote top-level one-line plain values (the ``description: a: b`` case)."""
    out = []
    for line in text.split("\n"):
        match = _PLAIN_KEY_VALUE.match(line)
        if match:
            value = match.group("value")
            if value[0] not in "\"'[{|>&*!%@`#" and (": " in value or " #" in value or value.endswith(":")):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                line = f'{match.group("key")}: "{escaped}"'
        out.append(line)
    return "\n".join(out)
