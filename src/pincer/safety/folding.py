"""Folded text: the one normal form in which a secret's trivial transforms all look alike.

A tool that echoes a credential upper-cased, spaced out, joined with zero-width characters or
written as ``\\uXXXX`` / ``\\xXX`` escapes hides it from a literal search. Folding removes those
differences from both sides: :func:`fold` (fast, C-level operations only) gives the text the
scanner searches, and :func:`fold_mapped` (a Python pass, run only after a find) gives the same
text with, for each of its characters, the span of the original it came from, so a find redacts
the original text.

Folding: escapes decoded (``\\uXXXX``, ``\\UXXXXXXXX``, runs of ``\\xXX`` as UTF-8), whitespace and
invisible characters (zero-width space/joiners, word joiner, BOM, soft hyphen) dropped, letters
lower-cased. :func:`folded_forms` lists what of a secret is searched for in folded text: the
secret itself, reversed, rot13, its first and last halves, base32 and base64 (folded, so also
broken by line wraps) and hex (so also in mixed case or spaced out).
"""

from __future__ import annotations

import base64
import codecs
import re
from dataclasses import dataclass

from pincer.safety.encodings import BASE64, HEX, base64_cores

__all__ = [
    "fold",
    "fold_mapped",
    "folded_forms",
    "FoldedForm",
    "base32_cores",
    "MIN_FOLDED_LENGTH",
    "FOLDED",
    "REVERSED",
    "ROT13",
    "PART",
    "BASE32",
]

# A secret shorter than this is searched only in its literal forms: folded (and halved, and
# reversed) short values would match ordinary text by chance.
MIN_FOLDED_LENGTH = 12

FOLDED = "secret_folded"  # case, spacing, invisible characters or \u/\x escapes changed
REVERSED = "secret_reversed"
ROT13 = "secret_rot13"
PART = "secret_part"  # one half of a secret split in two
BASE32 = "secret_base32"

_ESCAPE = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_INVISIBLE = "\u00ad\u034f\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff"
# Every character str.isspace() accepts (written out: computing it costs ~0.1 s at import).
_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_DROPPED = frozenset(_WHITESPACE + _INVISIBLE)
_DROP_TABLE = dict.fromkeys(map(ord, _DROPPED))
_ASCII_DROPPED = bytes(sorted(ord(c) for c in _DROPPED if ord(c) < 128))
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def _unescape(match: re.Match[str]) -> str:
    escape = match.group()
    if escape[1] == "x":
        return bytes.fromhex(escape.replace("\\x", "")).decode("utf-8", errors="replace")
    code = int(escape[2:], 16)
    return chr(code) if code < 0x110000 else escape


def fold(text: str) -> str:
    """``text`` folded (see the module docstring). ASCII text costs two byte-level passes."""
    if "\\" in text:
        text = _ESCAPE.sub(_unescape, text)
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_LOWER, _ASCII_DROPPED).decode("ascii")
    return text.translate(_DROP_TABLE).lower()


def fold_mapped(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` folded, and for each folded character the start and end of its original span.

    Characters decoded from one non-ASCII ``\\x`` run all map to the whole run (a find redacts
    all of it: conservative). The result can differ from :func:`fold` in rare case mappings
    (final sigma); callers search this text again rather than reuse :func:`fold`'s indexes.
    """
    if "\\" not in text and text.isascii():
        # The common case, a list comprehension rather than a call per character.
        kept = [index for index, char in enumerate(text) if char not in _DROPPED]
        return fold(text), kept, [index + 1 for index in kept]
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def emit(piece: str, start: int, end: int) -> None:
        for char in piece:
            if char in _DROPPED:
                continue
            for low in char.lower():
                chars.append(low)
                starts.append(start)
                ends.append(end)

    position = 0
    for match in _ESCAPE.finditer(text) if "\\" in text else ():
        for index in range(position, match.start()):
            emit(text[index], index, index + 1)
        decoded = _unescape(match)
        escape = match.group()
        if escape[1] == "x" and decoded.isascii() and len(decoded) * 4 == len(escape):
            for offset, char in enumerate(decoded):
                emit(char, match.start() + 4 * offset, match.start() + 4 * offset + 4)
        else:
            emit(decoded, match.start(), match.end())
        position = match.end()
    for index in range(position, len(text)):
        emit(text[index], index, index + 1)
    return "".join(chars), starts, ends


def base32_cores(data: bytes) -> list[str]:
    """The stable core of ``data`` base32-encoded at each of the five byte offsets."""
    cores = []
    for offset in range(5):
        encoded = base64.b32encode(b"\x00" * offset + data).decode("ascii")
        first = -(-8 * offset // 5)  # first character made only of the value's bits
        end = 8 * (offset + len(data)) // 5
        if end > first:
            cores.append(encoded[first:end])
    return cores


@dataclass(frozen=True, kw_only=True, slots=True)
class FoldedForm:
    """What finding one folded form means: its kind and, for a half (``PART``), the whole folded
    value and which end of it the form is (``1`` first half, ``-1`` last), so a find can be
    extended over the rest of that piece."""

    kind: str
    whole: str = ""
    side: int = 0


def folded_forms(value: str) -> dict[str, FoldedForm]:
    """What of ``value`` to search for in folded text, each mapped to its meaning; empty for a value
    whose folded form is shorter than ``MIN_FOLDED_LENGTH``.

    Halves: a value split anywhere into two pieces leaves one piece of at least half its length,
    which holds the value's first or last ``ceil(n/2)`` characters; both are searched when that
    is at least ``MIN_FOLDED_LENGTH`` characters (values of 23+ characters), so a split with any
    text between the pieces is still caught (the shorter piece, under half the value, stays).
    """
    folded = fold(value)
    if len(folded) < MIN_FOLDED_LENGTH:
        return {}
    forms: dict[str, FoldedForm] = {}

    def add(form: str, kind: str, side: int = 0) -> None:
        if len(form) >= MIN_FOLDED_LENGTH:
            forms.setdefault(form, FoldedForm(kind=kind, whole=folded if side else "", side=side))

    add(folded, FOLDED)
    add(folded[::-1], REVERSED)
    add(fold(codecs.encode(value, "rot13")), ROT13)
    half = -(-len(folded) // 2)
    add(folded[:half], PART, 1)
    add(folded[-half:], PART, -1)
    data = value.encode("utf-8", errors="surrogatepass")
    add(data.hex(), HEX)
    for core in base32_cores(data):
        add(core.lower(), BASE32)
    for core in base64_cores(data):
        add(core.lower(), BASE64)
        add(core.replace("+", "-").replace("/", "_").lower(), BASE64)
    return forms
