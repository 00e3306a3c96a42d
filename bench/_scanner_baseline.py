"""The leak scanner as it was before issue 34 (commit 34a3af8), kept callable as the baseline that
``bench/scanner.py`` measures the normalising scanner against in the same run.

Only what differs is here: its *folded* second pass (escapes decoded, whitespace and zero-width
characters dropped, lower case; forms: the value, reversed, rot13, halves, hex, base32, base64)
and its search loop. Everything the two share (the literal automaton's roles, redaction, the
JSON walk, base64 widening) is imported from ``pincer.safety.scanner``, so the comparison is of
the passes alone. Not used by pincer itself.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick, Implementation, MatchKind

from pincer.safety.encodings import (
    BASE32,
    BASE64,
    HEX,
    RAW,
    URL,
    base32_cores,
    base64_cores,
    encoded_forms,
    percent_decoded,
)
from pincer.safety.scanner import (
    _JOIN,
    LiteralSearch,
    _collect,
    _extend_part,
    _is_encodable,
    _redact,
    _searchable,
    _TooDeep,
    _widen_base32,
    _widen_base64,
)

__all__ = ["BaselineScanner"]

MIN_FOLDED_LENGTH = 12
MAX_PERCENT_LAYERS = 3
MAX_DFA_PATTERNS = 1500
PART = "secret_part"
_ESCAPE = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_INVISIBLE = "\u00ad\u034f\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff"
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
    if "\\" in text:
        text = _ESCAPE.sub(_unescape, text)
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_LOWER, _ASCII_DROPPED).decode("ascii")
    return text.translate(_DROP_TABLE).lower()


def fold_mapped(text: str) -> tuple[str, list[int], list[int]]:
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def emit(piece: str, start: int, end: int) -> None:
        for char in piece:
            if char not in _DROPPED:
                for low in char.lower():
                    chars.append(low)
                    starts.append(start)
                    ends.append(end)

    position = 0
    for match in _ESCAPE.finditer(text) if "\\" in text else ():
        for index in range(position, match.start()):
            emit(text[index], index, index + 1)
        emit(_unescape(match), match.start(), match.end())
        position = match.end()
    for index in range(position, len(text)):
        emit(text[index], index, index + 1)
    return "".join(chars), starts, ends


@dataclass(frozen=True, kw_only=True, slots=True)
class FoldedForm:
    kind: str
    whole: str = ""
    side: int = 0


def folded_forms(value: str) -> dict[str, FoldedForm]:
    folded = fold(value)
    if len(folded) < MIN_FOLDED_LENGTH:
        return {}
    forms: dict[str, FoldedForm] = {}

    def add(form: str, kind: str, side: int = 0) -> None:
        if len(form) >= MIN_FOLDED_LENGTH:
            forms.setdefault(form, FoldedForm(kind=kind, whole=folded if side else "", side=side))

    add(folded, "secret_folded")
    add(folded[::-1], "secret_reversed")
    add(fold(codecs.encode(value, "rot13")), "secret_rot13")
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


class BaselineScanner:
    """``scan_text`` and ``scan`` as the scanner had them before issue 34."""

    def __init__(self, values: Iterable[str], *, min_length: int = 8) -> None:
        forms: dict[str, str] = {}
        self._folded: dict[str, FoldedForm] = {}
        for value in values:
            for form, kind in encoded_forms(value, min_length=min_length).items():
                forms.setdefault(form, kind)
            for form, meaning in folded_forms(value).items():
                self._folded.setdefault(form, meaning)
        self._literal = LiteralSearch(forms)
        folded = [f for f in self._folded if _is_encodable(f)]
        self._folded_kinds = [self._folded[f] for f in folded]
        implementation = Implementation.DFA if len(folded) <= MAX_DFA_PATTERNS else None
        self._folded_detector = (
            AhoCorasick(folded, matchkind=MatchKind.LeftmostLongest, implementation=implementation) if folded else None
        )
        self._folded_finder = AhoCorasick(folded) if folded else None

    def scan_text(self, text: str) -> tuple[str, int]:
        spans = self._spans(text)
        return _redact(text, spans) if spans else (text, 0)

    def scan(self, value: Any) -> tuple[Any, int]:
        if isinstance(value, str):
            return self.scan_text(value)
        parts: list[str] = []
        try:
            _collect(value, parts)
        except _TooDeep:
            return value, 0
        if not self._spans(_JOIN.join(parts)):
            return value, 0
        raise NotImplementedError("the baseline measures text without secrets only")

    def _spans(self, text: str, layers: int = MAX_PERCENT_LAYERS) -> list[tuple[int, int, str]]:
        spans = self._literal.spans(text, {})
        if layers and "%" in text:
            for plus in (False, True) if "+" in text else (False,):
                view = percent_decoded(text, plus=plus)
                if view is None:
                    break
                for start, end, kind in self._spans(view.text, layers - 1):
                    first, last = view.original_span(start, end)
                    spans.append((first, last, URL if kind == RAW and text[first:last] != view.text[start:end] else kind))
        if self._folded_detector is not None:
            self._add_folded_spans(spans, text)
        return spans

    def _add_folded_spans(self, spans: list[tuple[int, int, str]], text: str) -> None:
        assert self._folded_detector is not None and self._folded_finder is not None
        if not self._folded_detector.find_matches_as_indexes(_searchable(fold(text))):
            return
        mapped, starts, ends = fold_mapped(text)
        mapped = _searchable(mapped)
        found = [
            (*_extend_part(mapped, start, end, self._folded_kinds[index]), self._folded_kinds[index])  # type: ignore[arg-type]
            for index, start, end in self._folded_finder.find_matches_as_indexes(mapped, overlapping=True)
        ]
        found.sort(key=lambda item: (item[0] - item[1], item[2].kind == PART))
        for start, end, role in found:
            first, last = starts[start], ends[end - 1]
            if role.kind == BASE64:
                first, last = _widen_base64(text, first, last)
            elif role.kind == BASE32:
                first, last = _widen_base32(text, first, last)
            if not any(a <= first and last <= b for a, b, _ in spans):
                spans.append((first, last, role.kind))
