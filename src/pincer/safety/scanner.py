"""The leak scanner: redacts secret values and credential shapes from everything a tool returns.

    scanner = LeakScanner(store.values())
    output, count = scanner.with_values(access.injected).scan(tool_output)

What is redacted, each span replaced by ``[REDACTED:<kind>]`` (never any part of the secret):

- every value given to the constructor or to ``with_values``, raw and URL-/JSON-escaped
  whatever its length, and, for values of at least ``min_length`` characters (default 8), as
  lower/upper hex and as base64 (standard or url-safe, padded or not, alone or anywhere inside
  a longer blob: see ``encodings``). Shorter values' encodings would match ordinary output by
  chance; their raw form is still always redacted.
- well-known credential shapes (``patterns.SHAPES``): OpenAI, Anthropic, AWS, GitHub, Stripe,
  Slack and Google keys, PEM private keys, ``Bearer`` tokens.
- all of the above percent-encoded in any way: text holding ``%`` is also searched decoded
  (``encodings.percent_decoded``: any mix of escaped and plain characters, escapes in upper,
  lower or mixed case, ``+`` or ``%20`` for a space, up to ``MAX_PERCENT_LAYERS`` rounds of
  encoding), and a find there redacts the span of the original it was decoded from.
- every value whose normal form has at least ``normalising.MIN_NORMALISED_LENGTH`` (8)
  letters and digits, in disguise: the text is also searched *normalised*
  (``normalising.normalise``: NFKD, HTML character references and ``\\u``/``\\x``/octal escapes
  decoded after any number of backslashes, case folded, every character but letters and digits
  dropped), so joined by any separators (``-``, ``.``, ``_``, ``,``, spaces, zero-width and control
  characters), a JSON list of its characters, fullwidth, in any case, referenced or escaped,
  reversed or rot13, and the letters of its escapes, hex, base64 and base32 (of the value, of it
  reversed and of its normal form) however those are broken up, cased, reversed or rot13'd; for
  values of 19+ letters and digits also its first and last halves, so a value split in two with
  any text between keeps its longer piece (the shorter one, under half, is left). Text whose
  escapes were decoded is searched undecoded too (an escape broken apart keeps its letters).
  A find redacts the span of the original it was normalised from (``normalise_mapped``).
- all of the above inside runs of base64, base32 or hex (``encoded_runs``: 16+ characters of
  the alphabet, decoded at every alignment), so an encoding of a disguised value (base64 of it
  dash-joined, of it reversed, of its base64); a find redacts the encoded characters that hold
  it, in whole groups.
- a JSON value's strings are searched as one text, so a value spread over several strings (a
  list of its characters) is found; each string loses its part of the find.

Overlapping finds are merged, so one secret that contains or overlaps another never leaves a
piece behind. Not found: a value with fewer than 8 letters and digits in any disguise (it is
matched only whole); a value split into three or more pieces, or into two when its normal form
has fewer than 19 characters; a named character reference taken apart, reversed or rot13'd
(names are not canonical); look-alike letters of other scripts (Cyrillic ``а``); three
transforms combined (base64 of the dash-joined value
percent-encoded), gzip and other encodings; a value written one character per tool call or per
progress message; and a value whose first characters form an escape with a literal ``%`` just
before it (``%4`` + ``1abc``: a URL decoder reads that ``A`` too). A secret that is a substring
of a marker (``secret``, ``REDACTED``) can of course still be read in the marker.

Speed: all literal forms and shape anchors go into one Aho-Corasick automaton (Rust, via
``ahocorasick_rs``), so a miss costs one pass over the text whatever the store holds; a JSON
value is searched as one joined text and rebuilt only when something was found. Values added
per call with ``with_values`` are checked with plain substring tests and never rebuild the
automaton. Text without ``%`` (the common case) costs one ``in`` test more than before.
Normalising ASCII text without ``\\`` or ``&`` is one byte-level pass (``bytes.translate``); the
normal forms are searched by a second automaton over their first ``ANCHOR`` characters (a DFA
for stores of up to ~130 secrets), each hit checked against the whole form; runs of base64 are
found by two byte-level passes. The Python pass that maps normal text back runs only after a
find, on the pieces of about ``WINDOW`` characters around it. ``bench/scanner.py`` compares
this with the scanner before in one run: 0.6-1.2x its time on a megabyte without a secret
(logs, or pincer's own source), 1.1-1.9x on a 94-byte line (a few microseconds).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick, Implementation, MatchKind

from pincer.core.errors import UsageError
from pincer.safety.encoded_runs import encoded_runs
from pincer.safety.encodings import BASE32, BASE64, RAW, URL, encoded_forms, percent_decoded
from pincer.safety.normalising import (
    MIN_NORMALISED_LENGTH,
    PART,
    SAFE_CUT,
    NormalForm,
    normal_forms,
    normal_views,
    normalise,
    normalise_mapped,
)
from pincer.safety.patterns import SHAPES, CredentialShape

logger = logging.getLogger(__name__)

__all__ = ["LeakScanner", "DEFAULT_MIN_ENCODED_LENGTH", "MAX_FAST_DEPTH", "MAX_PERCENT_LAYERS", "marker"]

DEFAULT_MIN_ENCODED_LENGTH = 8
# Rounds of percent-encoding undone (``%2573`` is ``s`` encoded twice); each costs one more
# decode, and only of text that still holds "%".
MAX_PERCENT_LAYERS = 3
# Normal forms are searched by their first ANCHOR characters (every form has at least that many),
# so the automaton stays small whatever the forms' length; a hit is checked against whole forms.
ANCHOR = MIN_NORMALISED_LENGTH
MAX_DFA_ANCHORS = 8000  # about 60 per secret: stores of up to ~130 secrets get the faster DFA
# A find in normal text is mapped back by a Python pass over the piece of the text around it:
# pieces of about this many characters.
WINDOW = 4096
MAX_FAST_DEPTH = 64  # deeper (or cyclic) JSON skips the one-pass search for the careful rebuild
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
# Joins the strings of a JSON value for the one-pass search. Any separator is sound: every
# string appears whole in the joined text, and a find spanning two strings only costs the
# rebuild pass, which scans each string alone.
_JOIN = "\x00"
_UNSCANNABLE = "[REDACTED:unscannable_output]"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class _Role:
    """What finding one literal means: a secret form of some kind, and/or shapes to confirm."""

    kind: str | None
    shapes: tuple[CredentialShape, ...]


class LeakScanner:
    """Immutable and thread-safe; build one per store version, derive one per call."""

    __slots__ = (
        "_literal", "_forms", "_extra", "_min_length",
        "_normal", "_anchor_detector", "_anchor_finder", "_anchored", "_extra_normal",
    )  # fmt: skip

    def __init__(
        self, values: Iterable[str], *, min_length: int = DEFAULT_MIN_ENCODED_LENGTH, shapes: bool = True
    ) -> None:
        """``shapes=False``: the values only, for text a tool parses (an API's response body),
        where a credential the API hands out on purpose must stay readable."""
        if not isinstance(min_length, int) or min_length < 1:
            raise UsageError(f"min_length must be a positive integer, not {min_length!r}")
        self._min_length = min_length
        self._forms: dict[str, str] = {}
        self._normal: dict[str, NormalForm] = {}
        for value in values:
            if not isinstance(value, str):
                raise UsageError(f"secret values must be strings, not {type(value).__name__}")
            if value:
                for form, kind in encoded_forms(value, min_length=min_length).items():
                    self._forms.setdefault(form, kind)
                for form, meaning in normal_forms(value).items():
                    self._normal.setdefault(form, meaning)
        self._literal = LiteralSearch(self._forms, shapes=shapes)
        self._extra: dict[str, _Role] = {}
        self._extra_normal: dict[str, NormalForm] = {}
        # Normal text is searched by an automaton of its own over the forms' anchors.
        anchored: dict[str, list[tuple[str, NormalForm]]] = {}
        for form, meaning in self._normal.items():
            anchored.setdefault(form[:ANCHOR], []).append((form, meaning))
        anchors = list(anchored)
        self._anchored = [anchored[a] for a in anchors]
        # A DFA searches about three times as fast as an NFA but grows with the anchors.
        implementation = Implementation.DFA if len(anchors) <= MAX_DFA_ANCHORS else None
        self._anchor_detector = (
            AhoCorasick(anchors, matchkind=MatchKind.LeftmostLongest, implementation=implementation) if anchors else None
        )
        self._anchor_finder = AhoCorasick(anchors) if anchors else None

    def with_values(self, extra: Iterable[str]) -> LeakScanner:
        """This scanner plus ``extra`` values (those injected during one call). Cheap: no rebuild."""
        added: dict[str, _Role] = {}
        added_normal: dict[str, NormalForm] = {}
        for value in extra:
            # A value the scanner already knows, as a secret or as one of its forms, is covered
            # (the usual case: credentials injected from the store, raw or percent-encoded).
            if isinstance(value, str) and value and value not in self._forms:
                for form, kind in encoded_forms(value, min_length=self._min_length).items():
                    if form not in self._forms and form not in self._extra:
                        added.setdefault(form, _Role(kind, ()))
                for form, meaning in normal_forms(value).items():
                    if form not in self._normal and form not in self._extra_normal:
                        added_normal.setdefault(form, meaning)
        if not added and not added_normal:
            return self
        clone = object.__new__(LeakScanner)
        clone._literal, clone._forms, clone._min_length = self._literal, self._forms, self._min_length
        clone._normal, clone._anchored = self._normal, self._anchored
        clone._anchor_detector, clone._anchor_finder = self._anchor_detector, self._anchor_finder
        clone._extra = {**self._extra, **added}
        clone._extra_normal = {**self._extra_normal, **added_normal}
        return clone

    # -- public scanning -------------------------------------------------------------------

    def scan_text(self, text: str) -> tuple[str, int]:
        """``text`` with every find redacted, and the number of redacted spans."""
        spans = self._spans(text)
        return _redact(text, spans) if spans else (text, 0)

    def contains_secret(self, text: str) -> bool:
        """Whether ``text`` holds anything ``scan_text`` would redact (checked before sending)."""
        return bool(self._spans(text))

    def scan(self, value: Any) -> tuple[Any, int]:
        """A JSON value with every string (dict keys too) scanned, and the redaction count.

        The strings are searched as one text, so a secret spread over several of them (a list
        of its characters) is found; each string redacts its part of the find. Returns ``value``
        itself when nothing was found. Numbers whose text holds a secret become the redacted
        text; other objects are judged by ``str()``.
        """
        if isinstance(value, str):
            return self.scan_text(value)
        parts: list[str] = []
        try:
            _collect(value, parts)
        except _TooDeep:
            return self._scan_careful(value)
        spans = self._spans(_JOIN.join(parts))
        if not spans:
            return value, 0
        rebuild = _Rebuild(_spans_by_part(spans, parts))
        scanned = rebuild.apply(value)
        return (scanned, rebuild.count) if rebuild.count else (value, 0)

    # -- internals -------------------------------------------------------------------------

    def _scan_careful(self, value: Any) -> tuple[Any, int]:
        """A value too deep (or cyclic) for the one-text search: each string scanned alone."""
        counter = [0]
        try:
            scanned = self._rewrite(value, counter)
        except RecursionError:
            # Fail closed: a value too deep (or cyclic) to rebuild is not passed on at all.
            logger.warning("an output too deeply nested to redact was replaced whole")
            return _UNSCANNABLE, counter[0] + 1
        return (scanned, counter[0]) if counter[0] else (value, 0)

    def _spans(self, text: str, layers: int = MAX_PERCENT_LAYERS, runs: bool = True) -> list[tuple[int, int, str]]:
        spans = self._literal.spans(text, self._extra)
        if layers and "%" in text:
            self._add_decoded_spans(spans, text, layers)
        if self._anchor_detector is not None or self._extra_normal:
            self._add_normal_spans(spans, text)
        if runs:
            self._add_run_spans(spans, text, layers)
        return spans

    def _add_normal_spans(self, spans: list[tuple[int, int, str]], text: str) -> None:
        """Finds in ``text`` normalised (``normalising``: case, width, separators, references,
        escapes, reversed, rot13, encodings...) not already inside a literal find, as spans of
        ``text`` itself. Text whose references or escapes were decoded is also searched as it
        was (an escape taken apart or reversed keeps its letters there)."""
        for normal, decoded in normal_views(text):
            normal = _searchable(normal)
            found = self._normal_finds(normal)
            if not found:
                continue
            # Longest first, so a half inside a whole find adds nothing and the run keeps the
            # whole find's kind.
            found = [(*_extend_part(normal, start, end, role), role) for start, end, role in found]
            found.sort(key=lambda item: (item[0] - item[1], item[2].kind == PART))
            located = _Locator(text, normal, decode=decoded)
            for start, end, role in found:
                first, last = located.span(start, end)
                if role.kind == BASE64:
                    first, last = _widen_base64(text, first, last)
                elif role.kind == BASE32:
                    first, last = _widen_base32(text, first, last)
                if not any(a <= first and last <= b for a, b, _ in spans):
                    spans.append((first, last, role.kind))

    def _normal_finds(self, normal: str) -> list[tuple[int, int, NormalForm]]:
        found: list[tuple[int, int, NormalForm]] = []
        if self._anchor_detector is not None and self._anchor_detector.find_matches_as_indexes(normal):
            assert self._anchor_finder is not None
            anchored = self._anchored
            for index, start, _ in self._anchor_finder.find_matches_as_indexes(normal, overlapping=True):
                for form, role in anchored[index]:
                    if normal.startswith(form, start):
                        found.append((start, start + len(form), role))
        for form, role in self._extra_normal.items():
            start = normal.find(form)
            while start >= 0:
                found.append((start, start + len(form), role))
                start = normal.find(form, start + 1)
        return found

    def _add_run_spans(self, spans: list[tuple[int, int, str]], text: str, layers: int) -> None:
        """Finds in what runs of base64, base32 or hex in ``text`` decode to (a secret disguised,
        then encoded), as the encoded characters of ``text`` that hold them."""
        runs = encoded_runs(text)
        if runs is None:
            return
        for start, end, _ in self._spans(runs.text, layers, runs=False):
            for first, last, kind in runs.original_spans(start, end):
                while last < len(text) and text[last] == "=":
                    last += 1
                spans.append((first, last, kind))

    def _add_decoded_spans(self, spans: list[tuple[int, int, str]], text: str, layers: int) -> None:
        """Finds in ``text`` percent-decoded, as spans of ``text`` itself. Runs of base64 in the
        decoded text are not decoded again: the text itself had them (a ``+`` or ``/`` escaped
        in a blob is a third transform)."""
        # Both readings of "+" when there is one: a literal plus, or a form-encoded space.
        for plus in (False, True) if "+" in text else (False,):
            view = percent_decoded(text, plus=plus)
            if view is None:
                return
            for start, end, kind in self._spans(view.text, layers - 1, runs=False):
                first, last = view.original_span(start, end)
                if kind == RAW and text[first:last] != view.text[start:end]:
                    kind = URL
                spans.append((first, last, kind))

    def _rewrite(self, value: Any, counter: list[int]) -> Any:
        if isinstance(value, str):
            text, count = self.scan_text(value)
            counter[0] += count
            return text
        if isinstance(value, Mapping):
            return {self._rewrite(k, counter): self._rewrite(v, counter) for k, v in value.items()}
        if isinstance(value, list | tuple):
            items = [self._rewrite(item, counter) for item in value]
            return items if isinstance(value, list) else tuple(items)
        if value is None or isinstance(value, bool):
            return value
        text = _text(value)
        redacted, count = self.scan_text(text)
        if count:
            counter[0] += count
            return redacted
        return value


class _Locator:
    """The way back from a span of ``normalise(text)`` to the span of ``text`` it came from.

    ``normalise_mapped`` (a Python pass) runs only on the pieces of ``text`` a find lies in:
    ``text`` is cut about every ``WINDOW`` characters after a character no reference or escape
    can hold, so the normal forms of the pieces, end to end, are the normal form of ``text``.
    """

    def __init__(self, text: str, normal: str, *, decode: bool) -> None:
        self._text = text
        self._decode = decode
        self._cuts = _cuts(text)
        self._offsets = [0]
        for start, end in zip(self._cuts, self._cuts[1:], strict=False):
            self._offsets.append(self._offsets[-1] + len(normalise(text[start:end], decode=decode)))
        if self._offsets[-1] != len(normal):  # pragma: no cover -- cannot happen; if it did, one piece is safe
            logger.warning("normal text of the pieces differs from the whole's; mapping the whole text")
            self._cuts, self._offsets = [0, len(text)], [0, len(normal)]
        self._normal = normal
        self._mapped: dict[tuple[int, int], tuple[str, list[int], list[int]]] = {}

    def span(self, start: int, end: int) -> tuple[int, int]:
        first = bisect_right(self._offsets, start) - 1
        last = min(bisect_right(self._offsets, end - 1) - 1, len(self._cuts) - 2)
        base, limit = self._cuts[first], self._cuts[last + 1]
        key = (first, last)
        if key not in self._mapped:
            self._mapped[key] = normalise_mapped(self._text[base:limit], decode=self._decode)
        mapped, starts, ends = self._mapped[key]
        local = start - self._offsets[first]
        found = _searchable(mapped[local : local + end - start])
        if found != self._normal[start:end]:  # pragma: no cover -- cannot happen; fails closed if it did
            # The two normal forms disagree (they never should): redact the whole pieces.
            logger.warning("a find in normal text could not be mapped exactly; its pieces were redacted whole")
            return base, limit
        return base + starts[local], base + ends[local + end - start - 1]


def _cuts(text: str) -> list[int]:
    """Where to cut ``text`` into pieces of about ``WINDOW`` characters: after an ASCII character
    no reference or escape can hold (``normalising.SAFE_CUT``: a space, most punctuation)."""
    cuts = [0]
    while len(text) - cuts[-1] > 2 * WINDOW:
        found = SAFE_CUT.search(text, cuts[-1] + WINDOW)
        if found is None or found.end() >= len(text):
            break
        cuts.append(found.end())
    cuts.append(len(text))
    return cuts


class _Rebuild:
    """Rebuilds a JSON value with the spans found in its joined text applied, walking it in the
    order ``_collect`` did (each string, key and number is one part)."""

    def __init__(self, spans: dict[int, list[tuple[int, int, str]]]) -> None:
        self._spans = spans
        self._index = 0
        self.count = 0

    def _leaf(self, text: str, original: Any) -> Any:
        spans = self._spans.get(self._index)
        self._index += 1
        if not spans:
            return original
        redacted, count = _redact(text, spans)
        self.count += count
        return redacted

    def apply(self, value: Any) -> Any:
        # Never a str (scan takes text the short way, _child takes strings itself), None or a
        # boolean (they add no text to search, so no find lies in them).
        kind = type(value)
        if kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
            out = {}
            for key, child in value.items():
                new_key = self._leaf(key if type(key) is str else _text(key), key)
                out[new_key] = self._child(child)
            return out
        if kind is list or kind is tuple or isinstance(value, list | tuple):
            items = [self._child(child) for child in value]
            return items if isinstance(value, list) else tuple(items)
        return self._leaf(_text(value), value)

    def _child(self, child: Any) -> Any:
        kind = type(child)
        if kind is str:
            return self._leaf(child, child)
        if kind is int or kind is float:
            return self._leaf(_text(child), child)
        if child is not None and kind is not bool:
            return self.apply(child)
        return child


def _spans_by_part(spans: list[tuple[int, int, str]], parts: list[str]) -> dict[int, list[tuple[int, int, str]]]:
    """Spans of the joined text, cut into the spans of each part they touch."""
    offsets = []
    position = 0
    for part in parts:
        offsets.append(position)
        position += len(part) + len(_JOIN)
    by_part: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, kind in spans:
        index = max(bisect_right(offsets, start) - 1, 0)
        while index < len(parts) and offsets[index] < end:
            first = max(start - offsets[index], 0)
            last = min(end - offsets[index], len(parts[index]))
            if last > first:
                by_part.setdefault(index, []).append((first, last, kind))
            index += 1
    return by_part


class LiteralSearch:
    """The literal forms of the values and the credential shapes' anchors, found in text as it is."""

    __slots__ = ("_detector", "_finder", "_roles", "_fallback")

    def __init__(self, forms: Mapping[str, str], *, shapes: bool = True) -> None:
        roles: dict[str, _Role] = {form: _Role(kind, ()) for form, kind in forms.items()}
        for shape in SHAPES if shapes else ():
            for anchor in shape.anchors:
                role = roles.get(anchor, _Role(None, ()))
                roles[anchor] = _Role(role.kind, role.shapes + (shape,))
        # The automaton holds valid Unicode only; a form with a lone surrogate is tested by hand.
        self._fallback = {f: r for f, r in roles.items() if not _is_encodable(f)}
        patterns = [f for f in roles if f not in self._fallback]
        # Two automata over the same patterns: leftmost-longest answers "anything here?" about
        # three times faster (the crate's prefilters apply); only a hit pays for the
        # overlapping search, which finds every occurrence so overlaps can be merged.
        self._detector = AhoCorasick(patterns, matchkind=MatchKind.LeftmostLongest)
        self._finder = AhoCorasick(patterns)
        self._roles = [roles[f] for f in patterns]

    def spans(self, text: str, extra: Mapping[str, _Role]) -> list[tuple[int, int, str]]:
        """Every find in ``text``, and of the ``extra`` forms (tested by hand: no rebuild)."""
        spans: list[tuple[int, int, str]] = []
        try:
            found = self._detector.find_matches_as_indexes(text)
        except UnicodeEncodeError:
            # Lone surrogates: search a copy with each replaced (same length, same indexes).
            text_for_search = _replace_surrogates(text)
            found = self._detector.find_matches_as_indexes(text_for_search)
        else:
            text_for_search = text
        if found:
            found = self._finder.find_matches_as_indexes(text_for_search, overlapping=True)
            roles = self._roles
            for index, start, end in found:
                _add_spans(spans, text, roles[index], start, end)
        for table in (self._fallback, extra):
            for form, role in table.items():
                start = text.find(form)
                while start >= 0:
                    _add_spans(spans, text, role, start, start + len(form))
                    start = text.find(form, start + 1)
        return spans


def _add_spans(spans: list[tuple[int, int, str]], text: str, role: _Role, start: int, end: int) -> None:
    if role.kind is not None:
        if role.kind == BASE64:
            start, end = _widen_base64(text, start, end)
        spans.append((start, end, role.kind))
    for shape in role.shapes:
        span = shape.span_at(text, start)
        if span is not None and span[1] > span[0]:
            spans.append((span[0], span[1], shape.kind))


def _widen_base64(text: str, start: int, end: int) -> tuple[int, int]:
    """Take in the edge characters (partly the secret's bits) and any padding."""
    if start > 0 and text[start - 1] in _BASE64_CHARS:
        start -= 1
    if end < len(text) and text[end] in _BASE64_CHARS:
        end += 1
    for _ in range(2):
        if end < len(text) and text[end] == "=":
            end += 1
    return start, end


def _extend_part(text: str, start: int, end: int, role: NormalForm) -> tuple[int, int]:
    """A half of a split value found at ``text[start:end]``, extended over as much more of its
    piece as follows it (first half) or precedes it (last half)."""
    whole = role.whole
    if role.side > 0:
        while end < len(text) and end - start < len(whole) and text[end] == whole[end - start]:
            end += 1
    elif role.side < 0:
        while start > 0 and end - start < len(whole) and text[start - 1] == whole[-(end - start) - 1]:
            start -= 1
    return start, end


def _widen_base32(text: str, start: int, end: int) -> tuple[int, int]:
    """Take in the edge characters (partly the secret's bits) and any padding."""
    if start > 0 and text[start - 1].isalnum():
        start -= 1
    if end < len(text) and text[end].isalnum():
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end


def _searchable(text: str) -> str:
    """``text`` as the automaton takes it: lone surrogates replaced (same length, same indexes)."""
    return text if text.isascii() or _is_encodable(text) else _replace_surrogates(text)


def _redact(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, int]:
    """Replace the union of ``spans``; each merged run gets the kind of its first span."""
    spans.sort()
    pieces: list[str] = []
    position = 0
    count = 0
    run_start, run_end, run_kind = spans[0]
    for start, end, kind in spans[1:]:
        if start <= run_end:
            run_end = max(run_end, end)
            continue
        pieces += (text[position:run_start], marker(run_kind))
        count += 1
        position = run_end
        run_start, run_end, run_kind = start, end, kind
    pieces += (text[position:run_start], marker(run_kind), text[run_end:])
    return "".join(pieces), count + 1


class _TooDeep(Exception):
    """A value nested past MAX_FAST_DEPTH (or cyclic): scanned by the careful rebuild instead."""


def _collect(value: Any, parts: list[str], depth: int = 0) -> None:
    """Append the text of every string, key, number and other leaf of ``value`` to ``parts``.

    Exact type checks first, recursion for containers: this is the hot path of ``scan`` and
    costs about as much as the search itself (isinstance against the Mapping ABC costs more).
    """
    kind = type(value)  # never a str: scan takes text the short way, _collect_child takes strings itself
    if kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
        if depth >= MAX_FAST_DEPTH:
            raise _TooDeep
        for key, child in value.items():
            parts.append(key if type(key) is str else _text(key))
            _collect_child(child, parts, depth)
    elif kind is list or kind is tuple or isinstance(value, list | tuple):
        if depth >= MAX_FAST_DEPTH:
            raise _TooDeep
        for child in value:
            _collect_child(child, parts, depth)
    elif value is not None and kind is not bool:
        parts.append(_text(value))


def _collect_child(child: Any, parts: list[str], depth: int) -> None:
    kind = type(child)
    if kind is str:
        parts.append(child)
    elif kind is int or kind is float:
        parts.append(_text(child))
    elif child is not None and kind is not bool:
        _collect(child, parts, depth + 1)


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # a huge int past the digit limit, an object whose __str__ fails  # noqa: BLE001
        return ""


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _replace_surrogates(text: str) -> str:
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
