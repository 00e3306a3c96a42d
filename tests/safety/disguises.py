"""The disguises a stored secret takes on its way out, and an oracle that sees through them.

Written here independently of ``pincer.safety`` (the standard library's codecs, ``html`` and
``unicodedata`` only), so a test built on them checks the scanner rather than restating it.

``DISGUISES``: the transforms issue 34 lists (separators joined in, fullwidth letters, case, HTML
character references, ``\\u``/``\\x``/octal escapes with single or doubled backslashes, a JSON
list of the characters, reversal) and the encodings the scanner already knew (base64, base32,
hex, percent, rot13). ``revealed(text, secret)`` says whether ``text`` still gives ``secret``
away under any one or two of them.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from html.entities import codepoint2name
from urllib.parse import quote, unquote

Disguise = Callable[[str], str]


def _utf8(value: str) -> bytes:
    return value.encode("utf-8", errors="surrogatepass")


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in value)


def _named(value: str) -> str:
    """Named references where HTML has one: the double-struck letters (NFKC reads them as
    letters), the HTML 4 names (``&amp;``, ``&lt;``...) and a few HTML 5 ones; digits as they are."""
    extra = {"!": "excl", "#": "num", "$": "dollar", "%": "percnt", "(": "lpar", ")": "rpar", "*": "ast",
             "+": "plus", ",": "comma", ".": "period", "/": "sol", ":": "colon", ";": "semi", "=": "equals",
             "?": "quest", "@": "commat", "[": "lsqb", "\\": "bsol", "]": "rsqb", "^": "Hat", "_": "lowbar",
             "`": "grave", "{": "lcub", "|": "verbar", "}": "rcub", "'": "apos", "-": "hyphen"}  # fmt: skip
    out = []
    for c in value:
        if c.isascii() and c.isalpha():
            out.append(f"&{c}opf;")
        elif c in extra and c != "-":  # &hyphen; is U+2010, not "-"
            out.append(f"&{extra[c]};")
        elif ord(c) in codepoint2name:
            out.append(f"&{codepoint2name[ord(c)]};")
        else:
            out.append(c)
    return "".join(out)


def _octal(value: str) -> str:
    return "".join(f"\\{b:03o}" for b in _utf8(value))


def _u_escaped(value: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in value)


def _x_escaped(value: str) -> str:
    return "".join(f"\\x{b:02x}" for b in _utf8(value))


def _doubled(escape: Disguise) -> Disguise:
    return lambda value: escape(value).replace("\\", "\\\\")


DISGUISES: dict[str, Disguise] = {
    "dash-joined": "-".join,
    "dot-joined": ".".join,
    "underscore-joined": "_".join,
    "comma-joined": ",".join,
    "comma-space-joined": ", ".join,
    "space-separated": " ".join,
    "zero-width-joined": "\u200b".join,
    "control-joined": "\x07".join,
    "fullwidth": _fullwidth,
    "upper": str.upper,
    "html-decimal": lambda v: "".join(f"&#{ord(c)};" for c in v),
    "html-hex": lambda v: "".join(f"&#x{ord(c):x};" for c in v),
    "html-named": _named,
    "u-escaped": _u_escaped,
    "x-escaped": _x_escaped,
    "octal-escaped": _octal,
    "u-escaped-doubled": _doubled(_u_escaped),
    "x-escaped-doubled": _doubled(_x_escaped),
    "octal-escaped-doubled": _doubled(_octal),
    "json-list": lambda v: json.dumps(list(v)),
    "reversed": lambda v: v[::-1],
    "base64": lambda v: base64.b64encode(_utf8(v)).decode(),
    "base32": lambda v: base64.b32encode(_utf8(v)).decode(),
    "hex": lambda v: _utf8(v).hex(),
    "percent": lambda v: quote(v, safe="", errors="surrogatepass"),
    "rot13": lambda v: codecs.encode(v, "rot13"),
}


# -- the oracle ---------------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\+(?:[uU]\{([0-9a-fA-F]{1,6})\}|[uU]([0-9a-fA-F]{4})|[xX]([0-9a-fA-F]{2})|([0-7]{1,3}))")


def _unescape_once(text: str) -> str:
    """Escapes decoded (bytes of ``\\x``/octal runs as UTF-8), any number of backslashes each."""
    out: list[str] = []
    pending = bytearray()
    position = 0
    for match in _ESCAPE.finditer(text):
        if match.start() != position and pending:
            out.append(pending.decode("utf-8", errors="replace"))
            pending.clear()
        out.append(text[position : match.start()])
        brace, four, byte, octal = match.groups()
        if byte is not None or octal is not None:
            value = int(byte, 16) if byte is not None else int(octal, 8)
            if value < 256:
                pending.append(value)
            else:
                out.append(match.group())
        else:
            code = int(brace or four, 16)
            out.append(chr(code) if code < 0x110000 else match.group())
        position = match.end()
    if pending:
        out.append(pending.decode("utf-8", errors="replace"))
    out.append(text[position:])
    return "".join(out)


def normal(text: str) -> str:
    """References and escapes decoded, NFKC, case folded, every non-alphanumeric character dropped."""
    for _ in range(3):
        decoded = _unescape_once(html.unescape(unicodedata.normalize("NFKC", text)))
        if decoded == text:
            break
        text = decoded
    return letters(text)


def letters(text: str) -> str:
    """The letters and digits of ``text`` after NFKC and case folding, nothing decoded."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _decodings(text: str) -> list[str]:
    """``text``, percent-decoded, rot13, and what every run of it decodes to as base64, base32 or hex
    at any alignment (a last partial group padded)."""
    found = [text, unquote(text), codecs.encode(text, "rot13")]
    for run in re.findall(r"[A-Za-z0-9+/\-_=]{8,}", text):
        run = run.rstrip("=").translate(str.maketrans("-_", "+/"))
        for start in range(8):
            chunk = run[start:]
            for data in (_base64(chunk), _base32(chunk), _hex(chunk)):
                if data:
                    found.append(data.decode("utf-8", errors="replace"))
    return found


def _base64(chunk: str) -> bytes:
    chunk = chunk[: len(chunk) - 1] if len(chunk) % 4 == 1 else chunk
    try:
        return base64.b64decode(chunk + "=" * (-len(chunk) % 4))
    except binascii.Error:
        return b""


def _base32(chunk: str) -> bytes:
    chunk = chunk.upper()
    if not _BASE32_RUN.fullmatch(chunk):
        return b""
    extra = len(chunk) % 8  # a last group of 1, 3 or 6 characters is not base32
    piece = chunk[: len(chunk) - extra] if extra in (1, 3, 6) else chunk
    try:
        return base64.b32decode(piece + "=" * (-len(piece) % 8))
    except binascii.Error:
        return b""


_BASE32_RUN = re.compile(r"[A-Z2-7]+")


def _hex(chunk: str) -> bytes:
    try:
        return bytes.fromhex(chunk[: len(chunk) - len(chunk) % 2])
    except ValueError:
        return b""


@lru_cache(maxsize=64)
def _wanted(secret: str) -> re.Pattern[str]:
    """One pattern for the normal form of ``secret`` under each disguise, as it is, reversed, rot13."""
    assert len(normal(secret)) >= 8, "the oracle is for secrets with at least 8 letters and digits"
    wanted: set[str] = set()
    for disguise in DISGUISES.values():
        for form in (normal(disguise(secret)), letters(disguise(secret))):
            wanted |= {form, form[::-1], codecs.encode(form, "rot13")}
    return re.compile("|".join(map(re.escape, sorted(wanted, key=len, reverse=True))))


def revealed(text: str, secret: str) -> bool:
    """Whether ``text`` gives ``secret`` away: the normal form of the secret under any one disguise
    (so also the letters of its escapes or encodings, separated out), reversed or rot13, readable
    in the normal form of ``text`` or of any decoding of it (two layers deep)."""
    wanted = _wanted(secret)
    seen: set[str] = set()
    for layer in _decodings(text):
        for view in [layer, *_decodings(layer)[1:]]:
            if view in seen:
                continue
            seen.add(view)
            if wanted.search(normal(view)) or wanted.search(letters(view)):
                return True
    return False
