"""Runs of base64, base32 and hex in a text, decoded, so what they hold can be scanned too.

The scanner finds the encodings of a secret as it is stored; these decodings find an encoding
of a secret in disguise (base64 of the secret dash-joined, hex of its fullwidth form, base64 of
base64): the decoded text goes through the whole scan once more.

A run is at least ``MIN_RUN`` characters of the base64 alphabet (either one) between other
characters; it is decoded at every alignment (a blob can be glued to a word before it) as
base64 (standard or url-safe, not mixed), and also as hex and base32 when its characters allow.
Finding the runs costs two byte-level passes over the text; decoding costs one call per
alignment per run, so prose and logs (few runs) pay little and source code (identifiers with
``_``, paths) a few milliseconds a megabyte.

:meth:`EncodedRuns.original_span` maps a span of the decoded text back to the encoded characters
that hold it, whole groups (4 characters of base64 for 3 bytes, 8 of base32 for 5, 2 of hex).
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_right
from dataclasses import dataclass

from pincer.safety.encodings import BASE32, BASE64, HEX

__all__ = ["EncodedRuns", "encoded_runs", "MIN_RUN", "SEPARATOR"]

# Base64 of 12 bytes. Shorter runs are too many in ordinary text and hold fewer than the eight
# letters and digits the scanner needs of a disguised secret anyway.
MIN_RUN = 16
SEPARATOR = "\x00"  # between decoded pieces: the scanner's normal form drops it
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
_MASK = bytes(0x61 if byte in _ALPHABET else 0x20 for byte in range(256))
_RUN = b"a" * MIN_RUN
_HEX = frozenset("0123456789abcdefABCDEF")
_BASE32 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
_BASE32_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz234567")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Piece:
    """One decoding: its text, the encoded characters of the original it came from, and how many
    of those characters encode how many bytes."""

    text: str
    start: int  # in the original text, after the alignment
    end: int
    kind: str
    chars: int
    group: int


class EncodedRuns:
    """The decodings of every run, joined by ``SEPARATOR``, and the way back to the original."""

    __slots__ = ("text", "_pieces", "_starts")

    def __init__(self, pieces: list[_Piece]) -> None:
        self.text = SEPARATOR.join(piece.text for piece in pieces)
        self._pieces = pieces
        self._starts = []
        position = 0
        for piece in pieces:
            self._starts.append(position)
            position += len(piece.text) + len(SEPARATOR)

    def original_spans(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """The encoded characters of the original text that decode to ``text[start:end]``: one span
        per piece it touches, with the piece's kind."""
        spans = []
        index = max(bisect_right(self._starts, start) - 1, 0)
        while index < len(self._pieces) and self._starts[index] < end:
            piece, offset = self._pieces[index], self._starts[index]
            first = max(start - offset, 0)
            last = min(end - offset, len(piece.text))
            if last > first:
                spans.append(self._encoded(piece, first, last))
            index += 1
        return spans

    @staticmethod
    def _encoded(piece: _Piece, first: int, last: int) -> tuple[int, int, str]:
        before = len(piece.text[:first].encode("utf-8", errors="surrogateescape"))
        upto = before + len(piece.text[first:last].encode("utf-8", errors="surrogateescape"))
        group, chars = piece.group, piece.chars
        start = piece.start + before // group * chars
        end = min(piece.start + -(-upto // group) * chars, piece.end)
        return start, end, piece.kind


def encoded_runs(text: str) -> EncodedRuns | None:
    """The decodings of every run of ``text`` at least ``MIN_RUN`` characters long, or None."""
    if len(text) < MIN_RUN:
        return None
    # Same length, same indexes: every non-ASCII character becomes one "?" (not in any alphabet).
    data = text.encode("ascii", errors="replace")
    mask = data.translate(_MASK)
    pieces: list[_Piece] = []
    start = mask.find(_RUN)
    while start >= 0:
        end = mask.find(b" ", start)
        end = len(mask) if end < 0 else end
        pieces += _decodings(text[start:end], start)
        start = mask.find(_RUN, end)
    return EncodedRuns(pieces) if pieces else None


def _decodings(run: str, offset: int) -> list[_Piece]:
    found: list[_Piece] = []

    def add(data: bytes, start: int, kind: str, chars: int, group: int) -> None:
        if data:
            # A byte that is not UTF-8 becomes a space, not a surrogate: neither can be part of a
            # secret and the normal form drops both, but a surrogate makes the whole piece non-ASCII,
            # whose normal form is a Python pass per character (75 s for 5 MB of binary base64).
            # One character for one byte either way, so _encoded maps every find back the same.
            text = data.decode("utf-8", errors="surrogateescape").translate(_NOT_UTF8_AS_SPACE)
            found.append(_Piece(text=text, start=offset + start, end=offset + len(run), kind=kind, chars=chars, group=group))

    urlsafe = "-" in run or "_" in run
    if not (urlsafe and ("+" in run or "/" in run)):
        standard = run.translate(_URLSAFE) if urlsafe else run
        for align in range(4):
            add(_base64(standard[align:]), align, BASE64, 4, 3)
    chars = frozenset(run)
    if chars <= _HEX:
        for align in range(2):
            piece = run[align:]
            add(bytes.fromhex(piece[: len(piece) - len(piece) % 2]), align, HEX, 2, 1)
    if chars <= _BASE32 or chars <= _BASE32_LOWER:
        for align in range(8):
            add(_base32(run[align:].upper()), align, BASE32, 8, 5)
    return found


_URLSAFE = str.maketrans("-_", "+/")
_NOT_UTF8_AS_SPACE = dict.fromkeys(range(0xDC80, 0xDD00), " ")  # what surrogateescape makes of such bytes


def _base64(chunk: str) -> bytes:
    if len(chunk) % 4 == 1:
        chunk = chunk[:-1]
    try:
        return base64.b64decode(chunk + "=" * (-len(chunk) % 4))
    except binascii.Error:
        return b""


def _base32(chunk: str) -> bytes:
    # A last group of 1, 3 or 6 characters is not base32; without it the rest decodes.
    extra = len(chunk) % 8
    if extra in (1, 3, 6):
        chunk = chunk[:-extra]
    try:
        return base64.b32decode(chunk + "=" * (-len(chunk) % 8))
    except binascii.Error:
        return b""
