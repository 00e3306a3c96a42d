"""Text a person reads before deciding: shown whole or marked, never cut silently.

An approval prompt is an attack surface. A command padded with 600 spaces pushes its dangerous
tail out of view; a right-to-left override reorders what is shown; a control character can
rewrite a terminal line. So what a person is shown is made *honest* here: runs of whitespace are
collapsed into a visible count, control, format (bidi, zero-width) and other invisible
characters are shown as ``⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩``, and a cut says how much was cut and
where to see the rest.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["honest_text", "honest_json", "shorten"]

# Longer runs of whitespace than this are shown as a count, so nothing hides behind them.
MAX_WHITESPACE_RUN = 3
_WHITESPACE_RUN = re.compile(r"\s{" + str(MAX_WHITESPACE_RUN + 1) + ",}")


def _escape_char(ch: str) -> str:
    # A marker JSON leaves alone (no backslashes to double), naming the character.
    code = ord(ch)
    name = unicodedata.name(ch, "") if code >= 0x80 else ""
    return f"⟨U+{code:04X}{' ' + name if name else ''}⟩"


def _is_invisible(ch: str) -> bool:
    # Cc control, Cf format (bidi overrides, zero-width joiners, tag characters), Cs surrogates,
    # Co private use, Cn unassigned, Zl/Zp line and paragraph separators.
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (category == "Zs" and ch != " ")


def _describe_run(run: str) -> str:
    if run == " " * len(run):
        return f"⟨{len(run)} spaces⟩"
    return f"⟨{len(run)} whitespace characters⟩"


def honest_text(text: str) -> str:
    """``text`` with long whitespace runs counted and invisible characters escaped."""
    text = _WHITESPACE_RUN.sub(lambda m: _describe_run(m.group(0)), text)
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape_char(ch) if _is_invisible(ch) else ch for ch in text)


def shorten(text: str, max_chars: int, *, see_all: str) -> str:
    """``text`` cut to ``max_chars`` with a marker that says how much more there is and how to
    see all of it (``see_all``: a command)."""
    if len(text) <= max_chars:
        return text
    more = len(text) - max_chars
    return f"{text[:max_chars]}… (truncated, {more} more characters; {see_all} shows all)"


def honest_json(value: Any, max_chars: int | None = None, *, see_all: str = "") -> str:
    """A JSON value as one honest line: strings inside it are made honest before encoding (the
    escapes then show as written), and a cut is marked."""
    text = json.dumps(_honest_strings(value), ensure_ascii=False, default=str)
    if max_chars is None:
        return text
    return shorten(text, max_chars, see_all=see_all)


def _honest_strings(value: Any) -> Any:
    if isinstance(value, str):
        return honest_text(value)
    if isinstance(value, dict):
        return {honest_text(str(k)): _honest_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_honest_strings(v) for v in value]
    return value
