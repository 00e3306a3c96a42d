"""Text a person reads before deciding: shown whole or marked, never cut silently.

An approval prompt is an attack surface. A command padded with 600 spaces pushes its dangerous
tail out of view; a right-to-left override reorders what is shown; a control character can
rewrite a terminal line. So what a person is shown is made *honest* here: runs of whitespace are
collapsed into a visible count, control, format (bidi, zero-width) and other invisible
characters are shown as ``⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩``, and a cut says how much was cut and
where to see the rest.

What is shown on several lines (``pincer approvals show``, ``pincer runs show``) keeps what
hides nothing: its line breaks as line breaks, indentation at the start of a line (up to
``MAX_INDENT_CHARS``), pincer's own JSON indentation, and short alignment runs inside a line;
the markers stay for what hides text (a long run of spaces, a pile of blank lines, an invisible or
bidirectional character). In JSON a string's line breaks and tabs are JSON's visible escapes
(``\n``, ``\t``), not markers.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["honest_text", "honest_json", "honest_block", "honest_detail", "shorten"]

# Longer runs of whitespace than this are shown as a count, so nothing hides behind them.
MAX_WHITESPACE_RUN = 3
_WHITESPACE_RUN = re.compile(r"\s{" + str(MAX_WHITESPACE_RUN + 1) + ",}")
# In text shown on several lines: indentation kept up to this, alignment runs inside a line up to
# MAX_INLINE_RUN, consecutive blank lines up to MAX_BLANK_LINES; more is counted.
MAX_INDENT_CHARS = 40
MAX_INLINE_RUN = 8
MAX_BLANK_LINES = 2
_INLINE_RUN = re.compile(r"\s{" + str(MAX_INLINE_RUN + 1) + ",}")
_INDENT = re.compile(r"[ \t]*")
# Inside a JSON string: runs (past MAX_INLINE_RUN, as in a line of a block) of whitespace other
# than the line breaks and tabs JSON escapes visibly.
_JSON_STRING_RUN = re.compile(r"[^\S\n\r\t]{" + str(MAX_INLINE_RUN + 1) + ",}")
_JSON_ESCAPED = frozenset("\n\r\t")


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


def honest_block(text: str) -> str:
    """``text`` on as many lines as it has: line breaks and ordinary indentation kept, long runs
    inside a line and piles of blank lines counted, invisible characters escaped."""
    shown: list[str] = []
    blank = 0
    for line in re.split(r"\r?\n", text.removesuffix("\n")):
        if not line.strip():
            blank += 1
            continue
        if blank:
            shown += [""] * blank if blank <= MAX_BLANK_LINES else [f"⟨{blank} blank lines⟩"]
            blank = 0
        indent = _INDENT.match(line).group(0)  # type: ignore[union-attr]  # matches the empty string at least
        body = line[len(indent) :]
        lead = indent if len(indent) <= MAX_INDENT_CHARS else _describe_run(indent)
        body = _INLINE_RUN.sub(lambda m: _describe_run(m.group(0)), body)
        if not (body.isascii() and body.isprintable()):
            body = "".join(_escape_char(ch) if _is_invisible(ch) and ch != "\t" else ch for ch in body)
        shown.append(lead.replace("\t", "    ") + body)
    if blank and shown:
        shown += [""] * min(blank, MAX_BLANK_LINES) if blank <= MAX_BLANK_LINES else [f"⟨{blank} blank lines⟩"]
    return "\n".join(shown)


def honest_json(value: Any, max_chars: int | None = None, *, see_all: str = "", indent: int | None = None) -> str:
    """A JSON value as one honest line (or, with ``indent``, pincer's own indented lines): strings
    inside it are made honest before encoding (the escapes then show as written), and a cut is
    marked."""
    text = json.dumps(_honest_strings(value), ensure_ascii=False, default=str, indent=indent)
    if max_chars is None:
        return text
    return shorten(text, max_chars, see_all=see_all)


def _honest_json_string(text: str) -> str:
    text = _JSON_STRING_RUN.sub(lambda m: _describe_run(m.group(0)), text)
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape_char(ch) if _is_invisible(ch) and ch not in _JSON_ESCAPED else ch for ch in text)


def _honest_strings(value: Any) -> Any:
    if isinstance(value, str):
        return _honest_json_string(value)
    if isinstance(value, dict):
        return {_honest_json_string(str(k)): _honest_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_honest_strings(v) for v in value]
    return value


# Keys of an approval's detail that are references for the tool, not facts for the person: the
# build_tool plan's id and the plan as data (its facts are the detail's other keys).
_DETAIL_NOT_SHOWN = frozenset({"plan_id", "plan"})


def honest_detail(detail: Any, max_chars: int, *, see_all: str) -> list[str]:
    """An approval's detail (what a runtime showed it with: the skill, its signer, fingerprint,
    scanner verdict and findings, what it asks for; a build's plan) as ``key: value`` lines, each
    value honest and cut at ``max_chars`` with a note naming ``see_all``."""
    if not isinstance(detail, dict):
        return []
    lines = []
    for key, value in detail.items():
        if key in _DETAIL_NOT_SHOWN:
            continue
        shown = shorten(honest_text(value), max_chars, see_all=see_all) if isinstance(value, str) else honest_json(value, max_chars, see_all=see_all)
        lines.append(f"{honest_text(str(key))}: {shown}")
    return lines
