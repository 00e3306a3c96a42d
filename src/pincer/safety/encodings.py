"""The forms a secret value takes when a tool echoes it: raw, URL- and JSON-escaped, hex, base64.

Percent-encoding has too many forms to list (any character may be escaped or not, each escape's
hex digits in either case, ``+`` or ``%20`` for a space), so text holding ``%`` is decoded
instead: :func:`percent_decoded` gives the decoded text and maps a span of it back to the span
of the original that it came from.

Base64 is the subtle one: inside a longer blob the value may start at any byte offset, and
the characters at its edges then mix in bits of its neighbours. For each of the three offsets
modulo 3 the characters that depend on the value alone form a *stable core*; finding any of
the three cores (in the standard or the url-safe alphabet) finds the value wherever it sits,
padded or not. The one or two edge characters outside the core carry at most 4 bits of the
value each; the scanner widens its redaction over them.
"""

from __future__ import annotations

import base64
import json
import re
from bisect import bisect_right
from urllib.parse import quote, quote_plus

__all__ = [
    "encoded_forms",
    "base64_cores",
    "base32_cores",
    "percent_decoded",
    "PercentDecoded",
    "RAW",
    "HEX",
    "BASE64",
    "BASE32",
    "URL",
    "JSON_ESCAPED",
]

RAW = "secret"
URL = "secret_url"
JSON_ESCAPED = "secret_json"
HEX = "secret_hex"
BASE64 = "secret_base64"
BASE32 = "secret_base32"

_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_ESCAPE_RUN = re.compile(r"%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*")  # a literal "%" first: sre scans for it fast
_ESCAPED_BYTES = range(0xDC80, 0xDD00)  # what surrogateescape makes of bytes that are not UTF-8


def base64_cores(data: bytes) -> list[str]:
    """The stable core of ``data`` encoded at each of the three byte offsets (standard alphabet)."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\x00" * offset + data).decode("ascii")
        first = -(-8 * offset // 6)  # first character made only of the value's bits
        end = 8 * (offset + len(data)) // 6  # one past the last such character
        if end > first:
            cores.append(encoded[first:end])
    return cores


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


def encoded_forms(value: str, *, min_length: int) -> dict[str, str]:
    """Every form of ``value`` to redact, mapped to its kind (``RAW`` first).

    The raw value and its URL/JSON escapes (never shorter than the value, differing only where
    it has special characters) are always included. Hex and base64 only when the value has at
    least ``min_length`` characters: a short value's encodings are a few characters that occur
    by chance in ordinary output (the base64 core of a 2-byte value is 2 characters).
    """
    forms: dict[str, str] = {value: RAW}

    def add(form: str, kind: str) -> None:
        if form and form not in forms:
            forms[form] = kind

    for quoted in (
        quote(value, safe="", errors="surrogatepass"),
        quote(value, errors="surrogatepass"),
        quote_plus(value, errors="surrogatepass"),
        quote_plus(value, safe="/", errors="surrogatepass"),
    ):
        add(quoted, URL)
        add(_ESCAPE.sub(lambda m: m.group(0).lower(), quoted), URL)
    add(json.dumps(value)[1:-1], JSON_ESCAPED)
    add(json.dumps(value, ensure_ascii=False)[1:-1], JSON_ESCAPED)
    if len(value) >= min_length:
        data = value.encode("utf-8", errors="surrogatepass")
        add(data.hex(), HEX)
        add(data.hex().upper(), HEX)
        for core in base64_cores(data):
            add(core, BASE64)
            add(core.replace("+", "-").replace("/", "_"), BASE64)
    return forms


class PercentDecoded:
    """``text``, decoded from an original, and the way back from a span of it to the original.

    ``_runs`` holds, for each run of escapes, where it starts in the decoded text and in the
    original, its length in each, and (only when it decoded to non-ASCII) its characters as
    decoded with ``surrogateescape`` (one surrogate per byte that was not UTF-8), from which
    each character's width in the original is recomputed when a find needs it.
    """

    __slots__ = ("text", "_starts", "_runs")

    def __init__(self, text: str, runs: list[tuple[int, int, int, int, str | None]]) -> None:
        self.text = text
        self._starts = [run[0] for run in runs]
        self._runs = runs

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that decoded into ``text[start:end]``."""
        return self._position(start), self._position(end)

    def _position(self, index: int) -> int:
        found = bisect_right(self._starts, index) - 1
        if found < 0:
            return index  # before the first escape the two texts agree
        decoded_start, original_start, decoded_length, original_length, chars = self._runs[found]
        offset = index - decoded_start
        if offset >= decoded_length:  # in the literal text after this run
            return original_start + original_length + offset - decoded_length
        if chars is None:
            return original_start + 3 * offset
        return original_start + sum(_escaped_width(char) for char in chars[:offset])


def _escaped_width(char: str) -> int:
    return 3 if ord(char) in _ESCAPED_BYTES else 3 * len(char.encode("utf-8"))


def percent_decoded(text: str, *, plus: bool = False) -> PercentDecoded | None:
    """``text`` with every run of ``%XX`` escapes (either case) decoded as UTF-8, or None when it
    holds no escape. ``plus`` also reads a literal ``+`` as a space (form encoding).

    Bytes that are not UTF-8 become U+FFFD, one per byte, so a secret's own bytes beside them
    still decode to the secret. A ``%`` that starts no escape stays as it is. Cost: one regex
    substitution with a small callback per run of escapes; the way back is worked out only for
    the spans a find asks about.
    """
    runs: list[tuple[int, int, int, int, str | None]] = []
    shrunk = 0  # how much shorter the decoded text is so far

    def decode(match: re.Match[str]) -> str:
        nonlocal shrunk
        data = bytes.fromhex(match.group().replace("%", ""))
        raw: str | None = None
        if data.isascii():
            chars = data.decode("ascii")
        else:
            raw = data.decode("utf-8", errors="surrogateescape")
            chars = "".join("\ufffd" if ord(c) in _ESCAPED_BYTES else c for c in raw)
        start, length = match.start(), match.end() - match.start()
        runs.append((start - shrunk, start, len(chars), length, raw))
        shrunk += length - len(chars)
        return chars

    # "+" is never part of an escape, so reading it as a space first changes no escape.
    decoded = _ESCAPE_RUN.sub(decode, text.replace("+", " ") if plus else text)
    return PercentDecoded(decoded, runs) if runs else None
