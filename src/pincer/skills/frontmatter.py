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
_ALIAS = re.compile(r"(?:^|[\s\[{,:-])[&*][^\s\[\]{},]+")


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
    if "&" in text or "*" in text:
        _refuse_aliases(text, source=source, first_line=first_line)
    try:
        value = yaml.load(text, Loader=_LOADER)
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
        # PyYAML's constructors raise plain Python errors for values they cannot build (an
        # impossible date, a huge exponent); all of them mean the same thing to the user.
        raise SkillError(
            f"the frontmatter is not valid YAML: {type(exc).__name__}: {str(exc)[:200]}",
            source=source,
            line=first_line,
            hint="check the values' syntax",
        ) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SkillError(
            f"the frontmatter must be a mapping of keys to values, not a {type(value).__name__}",
            source=source,
            line=first_line,
            hint="write one 'key: value' per line",
        )
    budget = [MAX_FRONTMATTER_NODES]
    plain = _plain(value, budget, 0, source)
    assert isinstance(plain, dict)
    return plain


def _refuse_aliases(text: str, *, source: str, first_line: int) -> None:
    """Anchors and aliases have no use in frontmatter and are how tiny files expand enormously.
    Checked on the token stream, so a ``*`` or ``&`` inside a quoted string is fine."""
    if not _ALIAS.search(text):
        return
    try:
        for token in yaml.scan(text, Loader=_LOADER):
            if isinstance(token, (yaml.AliasToken, yaml.AnchorToken)):
                raise SkillError(
                    "the frontmatter uses YAML anchors or aliases, which skills do not allow",
                    source=source,
                    line=first_line + token.start_mark.line,
                    hint="write the value out instead of referring to an anchor",
                )
    except yaml.YAMLError:
        return  # the loader reports the syntax error itself, with its line


def _plain(value: Any, budget: list[int], depth: int, source: str) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_NESTING:
        raise SkillError(
            f"the frontmatter is too large or too deeply nested (more than {MAX_FRONTMATTER_NODES} values "
            f"or {MAX_NESTING} levels)",
            source=source,
            hint="frontmatter holds metadata; move long content into the body or a file",
        )
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_key(k): _plain(v, budget, depth + 1, source) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, budget, depth + 1, source) for v in value]
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, budget, depth + 1, source) for v in value), key=str)
    return str(value)


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
