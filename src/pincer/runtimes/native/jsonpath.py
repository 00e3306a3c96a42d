"""A small path language for the ``json`` built-in: ``a.b[0].c``, ``$.items[-1]``, ``["a.b"]``.

Grammar (whitespace is not skipped; keys are taken literally)::

    path    := '$' rest | [step] rest
    rest    := (('.' key) | ('[' selector ']'))*
    step    := key | '[' selector ']'
    key     := one or more characters other than '.', '[' and ']'
    selector:= integer (negative counts from the end) | JSON string ("..." ) | '...' (no escapes)

A key applied to a list is read as an index when it is an integer (``items.0``), so both
spellings people use work. Every failure is a UsageError (bad path) or a ToolError (the document
has no such place), each naming the position or the prefix of the path that worked.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pincer.core.errors import ToolError, UsageError

__all__ = ["parse_path", "query", "format_path", "MAX_PATH_CHARS"]

MAX_PATH_CHARS = 4096
_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
_HINT = 'write keys separated by dots and indexes in brackets, e.g. a.b[0].c or ["key.with.dots"]'

Step = str | int


def parse_path(text: str) -> tuple[Step, ...]:
    """The steps of ``text``: str keys and int indexes. Raises UsageError naming the position."""
    if not isinstance(text, str):
        raise UsageError(f"the path must be a string, got {type(text).__name__}", hint=_HINT)
    if len(text) > MAX_PATH_CHARS:
        raise UsageError(f"the path is longer than {MAX_PATH_CHARS} characters", hint=_HINT)
    steps: list[Step] = []
    rooted = text == "$" or text.startswith(("$.", "$["))
    i = 1 if rooted else 0
    expect_key = not rooted  # at the start a bare key may follow without a dot
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "[":
            step, i = _selector(text, i + 1)
            steps.append(step)
            expect_key = False
        elif ch == "." and not expect_key:
            i += 1
            if i >= n or text[i] in ".[]":
                raise UsageError(f"path {text!r}: a key is missing after the '.' at position {i - 1}", hint=_HINT)
            expect_key = True
        elif expect_key and ch not in ".]":
            end = i
            while end < n and text[end] not in ".[]":
                end += 1
            steps.append(text[i:end])
            i = end
            expect_key = False
        else:
            raise UsageError(f"path {text!r}: unexpected {ch!r} at position {i}", hint=_HINT)
    return tuple(steps)


def _selector(text: str, i: int) -> tuple[Step, int]:
    """Parse what follows '[' up to and including ']'; returns (step, index after ']')."""
    n = len(text)
    if i < n and text[i] == '"':
        decoder = json.JSONDecoder()
        try:
            key, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            raise UsageError(
                f"path {text!r}: the quoted key at position {i} is not a valid JSON string", hint=_HINT
            ) from None
        i = end
    elif i < n and text[i] == "'":
        end = text.find("'", i + 1)
        if end < 0:
            raise UsageError(f"path {text!r}: the quoted key at position {i} is not closed", hint=_HINT)
        key, i = text[i + 1 : end], end + 1
    else:
        end = text.find("]", i)
        if end < 0:
            raise UsageError(f"path {text!r}: '[' at position {i - 1} is not closed", hint=_HINT)
        raw = text[i:end]
        if not _INT.match(raw):
            raise UsageError(
                f"path {text!r}: [{raw}] at position {i - 1} is not an integer index or a quoted key", hint=_HINT
            )
        return int(raw), end + 1
    if i >= n or text[i] != "]":
        raise UsageError(f"path {text!r}: expected ']' at position {i}", hint=_HINT)
    return key, i + 1


def format_path(steps: tuple[Step, ...]) -> str:
    """Steps back as text, for error messages (``$`` for the root)."""
    out = "$"
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step and not any(c in step for c in ".[]"):
            out += f".{step}"
        else:
            out += "[" + json.dumps(step, ensure_ascii=False) + "]"
    return out


def query(document: Any, steps: tuple[Step, ...]) -> Any:
    """The value at ``steps`` in ``document``; ToolError naming where the walk stopped and why."""
    current = document
    for depth, step in enumerate(steps):
        here = format_path(steps[:depth])
        if isinstance(current, dict):
            key = step if isinstance(step, str) else str(step)
            if key not in current:
                keys = ", ".join(sorted(map(repr, current))[:10]) or "none"
                raise ToolError(f"{here} has no key {key!r}", hint=f"keys there: {keys}")
            current = current[key]
        elif isinstance(current, list):
            index = step if isinstance(step, int) else (int(step) if _INT.match(step) else None)
            if index is None:
                raise ToolError(f"{here} is a list; {step!r} is not an index", hint="use [0], [1], ... or [-1]")
            if not -len(current) <= index < len(current):
                raise ToolError(
                    f"{here}[{index}] is out of range: the list has {len(current)} items",
                    hint="indexes start at 0; negative ones count from the end",
                )
            current = current[index]
        else:
            kind = "null" if current is None else type(current).__name__
            raise ToolError(f"{here} is a {kind}, which has no {step!r}", hint="shorten the path")
    return current
