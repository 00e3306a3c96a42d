"""Normalised text: the one form in which a secret's disguises all look alike.

A tool that echoes a credential dash-joined, spaced out, upper-cased, in fullwidth letters, as
HTML character references or as ``\\u``/``\\x``/octal escapes (with backslashes doubled, as a
quoted browser snapshot or a JSON encoder writes them) hides it from a literal search.
Normalising removes those differences from both sides, the text and the secret:

1. Unicode NFKD (compatibility decomposition: fullwidth and other compatibility letters become
   plain ones, accents come apart from their letters);
2. character references (``&#112;``, ``&#x70;``, ``&amp;``, any HTML 5 name) and escapes
   (``\\u0070``, ``\\U00000070``, ``\\u{70}``, ``\\x{70}``, ``\\x70``, ``\\160``, runs of byte
   escapes read as UTF-8, ``\\n``/``\\r``/``\\t``) decoded, each escape after any number of
   backslashes, up to ``DECODE_ROUNDS`` times (an escape of an escape);
3. NFKD again, case folding, NFKD again;
4. every character that is not a letter or digit (``str.isalnum``) dropped: punctuation,
   spaces, symbols, combining marks, zero-width and control characters.

Step 4 drops *every* separator, not only those between single characters: a secret's own
punctuation runs together with the separators put between its characters (``a-b---c`` is
``ab-c`` dash-joined), so only a form without punctuation is the same on both sides.

Every step is per character (decomposition never composes, case folding has no context) except
the decoding of a reference or escape, which never holds a space or most punctuation
(``SAFE_CUT``). So the normal form of a text is the concatenation of the normal forms of its
pieces cut after such a character, and :func:`normalise_mapped`, run only after a find, gives
the same text with, for each character, the span of the original it came from; a find redacts
that span of the original.

:func:`normal_forms` lists what of a secret is searched for in normal text (see there).
"""

from __future__ import annotations

import codecs
import html
import html.entities
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from pincer.safety.encodings import BASE32, BASE64, HEX, base32_cores, base64_cores

__all__ = [
    "normalise",
    "normalise_mapped",
    "normal_views",
    "normal_forms",
    "letters",
    "NormalForm",
    "MIN_NORMALISED_LENGTH",
    "MIN_PART_LENGTH",
    "DECODE_ROUNDS",
    "SAFE_CUT",
    "NORMALISED",
    "REVERSED",
    "ROT13",
    "PART",
    "ESCAPED",
    "BASE32",
]

# A secret whose normal form has fewer letters and digits than this is matched only whole (its
# literal forms: raw, URL-/JSON-escaped, hex, base64). Eight characters of [a-z0-9] are 41 bits:
# 100 random secrets' forms over 10 MB of ordinary text meet one by chance about once in a
# thousand such scans; fewer would redact ordinary words and numbers.
MIN_NORMALISED_LENGTH = 8
# A half of a secret split in two is searched when it has at least this many characters (52 bits
# of [a-z0-9]): values whose normal form has 19 or more.
MIN_PART_LENGTH = 10
DECODE_ROUNDS = 3

NORMALISED = "secret_normalised"  # case, separators, width, references or escapes changed
REVERSED = "secret_reversed"
ROT13 = "secret_rot13"
PART = "secret_part"  # one half of a secret split in two
ESCAPED = "secret_escaped"  # its escapes, references or %-escapes broken apart by separators

_NAMED = html.entities.html5
# A character reference: decimal, hex or named (with or without its ";", as browsers read it).
_REFERENCE = re.compile(r"&(?:#[xX](?P<refhex>[0-9a-fA-F]{1,6})|#(?P<refdec>[0-9]{1,7})|(?P<name>[A-Za-z][A-Za-z0-9]{1,31}));?")
# One escape after any number of backslashes (a literal first "\" lets the regex engine skip to
# each backslash: 0.4 ms a megabyte rather than 10). Byte escapes come as a run, read as UTF-8.
_ESCAPE = re.compile(
    r"\\\\*(?:"
    r"[uU](?P<high>[dD][89abAB][0-9a-fA-F]{2})\\+[uU](?P<low>[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|[uUxX]\{(?P<brace>[0-9a-fA-F]{1,6})\}"
    r"|U(?P<long>[0-9a-fA-F]{8})"
    r"|[uU](?P<short>[0-9a-fA-F]{4})"
    r"|(?P<bytes>(?:[xX][0-9a-fA-F]{2}|[0-3]?[0-7]{1,2})(?:\\+(?:[xX][0-9a-fA-F]{2}|[0-3]?[0-7]{1,2}))*)"
    r"|(?P<control>[nrt])"
    r")"
)
# An ASCII character no reference or escape holds: cut after it, a text's normal form is the
# normal forms of the two pieces end to end (every other step is per character).
SAFE_CUT = re.compile(r"[\x00-\x22\x24\x25\x27-\x2f\x3a\x3c-\x40\x5b\x5d-\x60\x7c\x7e\x7f]")
_BYTE = re.compile(r"\\+(?:[xX]([0-9a-fA-F]{2})|([0-7]{1,3}))")
_CONTROLS = {"n": "\n", "r": "\r", "t": "\t"}
_NON_ALNUM = re.compile(r"[\W_]+")
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_ASCII_DROPPED = bytes(c for c in range(128) if not chr(c).isalnum())
_HIGH_BYTES = bytes([0x2E] * 128 + [0x4E] * 128)  # UTF-8: ASCII -> ".", any other byte -> "N"
# One call per run of non-ASCII characters costs about 5 us; a pass over the whole text about
# 0.15 us a character: past one run in _CHARS_PER_RUN characters the whole-text pass is cheaper.
_CHARS_PER_RUN = 32
_ROT13 = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "nopqrstuvwxyzabcdefghijklmNOPQRSTUVWXYZABCDEFGHIJKLM"
)
_ROT13_BYTES = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", b"nopqrstuvwxyzabcdefghijklmNOPQRSTUVWXYZABCDEFGHIJKLM"
)


def _rot13(text: str) -> str:
    """rot13 of the ASCII letters (a byte-level pass for ASCII text: str.translate is per character)."""
    if text.isascii():
        return text.encode("ascii").translate(_ROT13_BYTES).decode("ascii")
    return text.translate(_ROT13)

# A decoded token: its characters, each with its span relative to the token's start.
_Pieces = list[tuple[str, int, int]]


def _token_pieces(match: re.Match[str]) -> _Pieces:
    """What one reference or escape decodes to; the matched text itself when it names nothing."""
    whole = match.group()
    end = len(whole)
    kind = next(name for name, group in match.groupdict().items() if group is not None)
    if kind == "bytes":
        return _byte_pieces(whole)
    if kind == "control":
        return [(_CONTROLS[match.group("control")], 0, end)]
    if kind == "name":
        name = match.group("name")
        semicolon = whole.endswith(";")
        for candidate in (name, name.lower(), name.capitalize()):
            text = _NAMED.get(candidate + ";" if semicolon else candidate)
            if text is not None:
                return [(char, 0, end) for char in text]
        return _unchanged(whole)
    if kind == "high":
        pair = chr(int(match.group("high"), 16)) + chr(int(match.group("low"), 16))
        return [(pair.encode("utf-16", "surrogatepass").decode("utf-16"), 0, end)]
    if kind == "long":
        code = int(match.group("long"), 16)
        if code >= 0x110000:  # \U0070 followed by four hex digits: a four-digit escape
            start = whole.index("U") + 1
            return [(chr(int(whole[start : start + 4], 16)), 0, start + 4)] + [
                (char, start + 4 + i, start + 5 + i) for i, char in enumerate(whole[start + 4 :])
            ]
        return [(chr(code), 0, end)]
    digits = match.group(kind) if kind in ("refhex", "refdec", "brace", "short") else ""
    code = int(digits, 10 if kind == "refdec" else 16)
    return [(chr(code), 0, end)] if code < 0x110000 else _unchanged(whole)


def _unchanged(whole: str) -> _Pieces:
    return [(char, index, index + 1) for index, char in enumerate(whole)]


def _byte_pieces(run: str) -> _Pieces:
    """A run of ``\\xHH``/octal escapes as UTF-8; each character maps to the escapes of its bytes."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: _Pieces = []
    first = 0
    for match in _BYTE.finditer(run):
        hex_digits, octal = match.groups()
        out = decoder.decode(bytes([int(hex_digits, 16) if hex_digits is not None else int(octal, 8)]))
        pieces.extend((char, first, match.end()) for char in out)
        if out:
            first = match.end()
    pieces.extend((char, first, len(run)) for char in decoder.decode(b"", final=True))
    return pieces


def _substitute(match: re.Match[str]) -> str:
    if match.groupdict().get("bytes") is not None:  # the common escape in code: no map needed here
        data = bytes(int(h, 16) if h else int(o, 8) for h, o in _BYTE.findall(match.group()))
        return data.decode("utf-8", errors="replace")
    return "".join(char for char, _, _ in _token_pieces(match))


def _decoded(text: str) -> str:
    """References, then escapes, decoded (and what they decode to decomposed); again while that
    changes something, at most ``DECODE_ROUNDS`` times."""
    for _ in range(DECODE_ROUNDS):
        decoded = _REFERENCE.sub(_substitute, text) if "&" in text else text
        decoded = _ESCAPE.sub(_substitute, decoded) if "\\" in decoded else decoded
        if decoded == text:
            break
        text = decoded if decoded.isascii() else _on_non_ascii(decoded, _nfkd)
    return text


def _nfkd(text: str) -> str:
    return unicodedata.normalize("NFKD", text)


def _fold(text: str) -> str:
    """Case folded between decompositions, everything but letters and digits dropped (non-ASCII).
    Upper-cased before the fold: a letter whose capital is another letter's (dotless ``ı`` and
    ``I``, long ``ſ`` and ``S``) folds like it, since ``upper()`` on the way out makes them one."""
    return _NON_ALNUM.sub("", _nfkd(_nfkd(text).upper().casefold()))


def _on_non_ascii(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to each run of non-ASCII characters (or, when there are
    many, to the whole text: ``change`` must leave ASCII letters and digits as they are)."""
    data = text.encode("utf-8", errors="surrogatepass")
    mask = data.translate(_HIGH_BYTES)
    pieces: list[str] = []
    position = 0
    start = mask.find(b"N")
    most = 2 * (len(text) // _CHARS_PER_RUN + 1)
    while start >= 0:
        if len(pieces) > most:
            return change(text)
        end = mask.find(b".", start)
        end = len(data) if end < 0 else end
        pieces.append(data[position:start].decode("ascii"))
        pieces.append(change(data[start:end].decode("utf-8", errors="surrogatepass")))
        position = end
        start = mask.find(b"N", end)
    pieces.append(data[position:].decode("ascii"))
    return "".join(pieces)


def _ascii_letters(text: str) -> str:
    """ASCII letters lower-cased and every ASCII character but letters and digits dropped."""
    data = text.encode("utf-8", errors="surrogatepass").translate(_ASCII_LOWER, _ASCII_DROPPED)
    return data.decode("utf-8", errors="surrogatepass")


def normalise(text: str, *, decode: bool = True) -> str:
    """``text`` normalised (see the module docstring); without ``decode``, references and escapes
    are left as they are (their letters and digits stay). ASCII text without ``\\`` or ``&``
    costs one byte-level pass; other text a regex scan for each of those two characters and one
    call per run of non-ASCII characters."""
    if not text.isascii():
        text = _on_non_ascii(text, _nfkd)
    if decode and ("\\" in text or "&" in text):
        text = _decoded(text)
    return _finish(text)


def normal_views(text: str) -> list[tuple[str, bool]]:
    """The normal form of ``text`` and, when decoding changed something, also its form without
    decoding (where an escape taken apart, ``\\-u-0-0-7-0``, or reversed, ``0700u\\``, keeps its
    letters): each with whether it was decoded."""
    if not text.isascii():
        text = _on_non_ascii(text, _nfkd)
    if "\\" not in text and "&" not in text:
        return [(_finish(text), True)]
    decoded = _decoded(text)
    if decoded == text:
        return [(_finish(text), True)]
    return [(_finish(decoded), True), (_finish(text), False)]


def _finish(text: str) -> str:
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_LOWER, _ASCII_DROPPED).decode("ascii")
    return _ascii_letters(_on_non_ascii(text, _fold))


def letters(text: str) -> str:
    """The letters and digits of ``text`` case-folded, nothing decoded (for ASCII encodings)."""
    return normalise(text, decode=False)


def normalise_mapped(text: str, *, decode: bool = True) -> tuple[str, list[int], list[int]]:
    """``normalise(text, decode=decode)`` and, for each of its characters, the start and end of
    the original span it came from (a decoded escape maps to the whole escape). A Python pass:
    run only after a find, on the piece of the text around it."""
    if text.isascii() and (not decode or ("\\" not in text and "&" not in text)):
        kept = [index for index, char in enumerate(text) if char.isalnum()]
        return _finish(text), kept, [index + 1 for index in kept]
    if text.isascii():
        chars, starts, ends = list(text), list(range(len(text))), list(range(1, len(text) + 1))
    else:
        chars, starts, ends = _decomposed(list(text), list(range(len(text))), list(range(1, len(text) + 1)))
    for _ in range(DECODE_ROUNDS if decode else 0):
        before = "".join(chars)
        for pattern, needle in ((_REFERENCE, "&"), (_ESCAPE, "\\")):
            joined = "".join(chars)
            if needle in joined:
                chars, starts, ends = _decode_mapped(pattern, joined, starts, ends)
        if "".join(chars) == before:
            break
        chars, starts, ends = _decomposed(chars, starts, ends)
    out: list[str] = []
    out_starts: list[int] = []
    out_ends: list[int] = []
    for char, start, end in zip(chars, starts, ends, strict=True):
        if char.isascii():
            if char.isalnum():
                out.append(char.lower())
                out_starts.append(start)
                out_ends.append(end)
            continue
        for folded in _nfkd(_nfkd(char).upper().casefold()):  # as _fold
            if folded.isalnum():
                out.append(folded.lower() if folded.isascii() else folded)
                out_starts.append(start)
                out_ends.append(end)
    return "".join(out), out_starts, out_ends


def _decomposed(chars: list[str], starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    out: list[str] = []
    out_starts: list[int] = []
    out_ends: list[int] = []
    for char, start, end in zip(chars, starts, ends, strict=True):
        for part in _nfkd(char) if not char.isascii() else char:
            out.append(part)
            out_starts.append(start)
            out_ends.append(end)
    return out, out_starts, out_ends


def _decode_mapped(
    pattern: re.Pattern[str], text: str, starts: list[int], ends: list[int]
) -> tuple[list[str], list[int], list[int]]:
    chars: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    position = 0
    for match in pattern.finditer(text):
        for index in range(position, match.start()):
            chars.append(text[index])
            new_starts.append(starts[index])
            new_ends.append(ends[index])
        offset = match.start()
        for char, first, last in _token_pieces(match):
            chars.append(char)
            new_starts.append(starts[offset + first])
            new_ends.append(ends[offset + last - 1])
        position = match.end()
    for index in range(position, len(text)):
        chars.append(text[index])
        new_starts.append(starts[index])
        new_ends.append(ends[index])
    return chars, new_starts, new_ends


# -- what of a secret is searched for ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class NormalForm:
    """What finding one normal form means: its kind and, for a half (``PART``), the whole normal
    value and which end of it the form is (``1`` first half, ``-1`` last), so a find can be
    extended over the rest of that piece."""

    kind: str
    whole: str = ""
    side: int = 0


_OCTAL = [f"{byte:03o}" for byte in range(256)]
# One meaning per kind, shared by every form of that kind (a half carries its whole: its own).
_MEANINGS = {kind: NormalForm(kind=kind) for kind in (NORMALISED, REVERSED, ROT13, ESCAPED, HEX, BASE64, BASE32)}


def _escape_letters(value: str) -> list[str]:
    """The letters and digits of ``value``'s escaped and referenced forms as encoders write them:
    ``\\u0070`` (UTF-16, as JSON), ``\\x70`` and ``\\160`` (UTF-8 bytes), ``&#112;``, ``&#x70;``,
    ``html.escape``, ``json.dumps`` (so also a JSON list of the characters), ``quote``. Built with
    byte-level operations: this runs once per secret and per value injected into a call."""
    data = value.encode("utf-8", errors="surrogatepass")
    utf16 = value.encode("utf-16-be", errors="surrogatepass")
    codes = [ord(char) for char in value]
    # Past the BMP also as \\U0001f600 (Python, C) rather than a UTF-16 pair (JSON, JavaScript).
    wide = ["".join(f"u{code:04x}" if code <= 0xFFFF else f"u{code:08x}" for code in codes)] if max(codes) > 0xFFFF else []
    return [
        "u" + utf16.hex("u", 2),
        *wide,
        "x" + data.hex("x"),
        "".join(map(_OCTAL.__getitem__, data)),
        "".join(map(str, codes)),
        "x" + "x".join(map("{:x}".format, codes)),
        letters(html.escape(value)),
        letters(json.dumps(value)),
        letters(quote(value, safe="", errors="surrogatepass")),
    ]


def _encodings(data: bytes, *, base32: bool = True) -> list[tuple[str, str]]:
    """Hex and the stable base64 (and base32) cores of ``data``, as letters and digits, with their
    kind. (Python's base32 encoder is pure Python, 20 us a call: five calls a value only.)"""
    forms = [(data.hex(), HEX)]
    forms += [(letters(core), BASE64) for core in base64_cores(data)]
    forms += [(letters(core), BASE32) for core in base32_cores(data)] if base32 else []
    return forms


def normal_forms(value: str) -> dict[str, NormalForm]:
    """What of ``value`` to search for in normal text, each mapped to its meaning; empty for a value
    whose normal form has fewer than ``MIN_NORMALISED_LENGTH`` characters.

    - its normal form, reversed, rot13 and both (what a joined, spaced, fullwidth, referenced,
      escaped or JSON-listed copy normalises to, also reversed or rot13);
    - the letters of its escaped, referenced and percent-encoded forms, also reversed or rot13 (an
      escape broken apart by a separator is not decoded: ``\\-u-0-0-7-0`` leaves ``u0070``);
    - the letters of its hex, base64 and base32 (any byte offset), also reversed or rot13 (so also
      upper- or lower-cased, joined or wrapped), and of the reversed and of the normal value;
    - its first and last halves when each has at least ``MIN_PART_LENGTH`` characters, so a value
      split in two with any text between keeps its longer piece.
    """
    normal = normalise(value)
    if len(normal) < MIN_NORMALISED_LENGTH:
        return {}
    forms: dict[str, NormalForm] = {}

    def add(form: str, kind: str, *, variants: bool = False, side: int = 0) -> None:
        if len(form) < MIN_NORMALISED_LENGTH or form in forms:
            return
        forms[form] = NormalForm(kind=kind, whole=normal, side=side) if side else _MEANINGS[kind]
        if variants:
            forms.setdefault(form[::-1], _MEANINGS[REVERSED])
            forms.setdefault(_rot13(form), _MEANINGS[ROT13])

    add(normal, NORMALISED, variants=True)
    add(_rot13(normal[::-1]), ROT13)
    # Differ from the two above when escapes or letters that decompose to ASCII ("º") are in it.
    add(normalise(value[::-1]), REVERSED)
    add(normalise(_rot13(value)), ROT13)
    # Case folding keeps a few letters apart that upper-casing joins (dotless "ı" becomes "I").
    add(normalise(value.upper()), NORMALISED, variants=True)
    half = -(-len(normal) // 2)
    if half >= MIN_PART_LENGTH:
        add(normal[:half], PART, side=1)
        add(normal[-half:], PART, side=-1)
    for escaped in _escape_letters(value):
        add(escaped, ESCAPED, variants=True)
    data = value.encode("utf-8", errors="surrogatepass")
    for form, kind in _encodings(data):
        add(form, kind, variants=True)
    # Of the reversed and the normal value, hex and base64 (alone in a text, any of these is also
    # found by decoding it: encoded_runs; these forms find them inside a longer blob).
    for other in (value[::-1].encode("utf-8", errors="surrogatepass"), normal.encode("utf-8")):
        for form, kind in _encodings(other, base32=False):
            add(form, kind)
    return forms

