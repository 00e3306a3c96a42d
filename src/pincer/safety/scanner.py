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
- every value of at least ``folding.MIN_FOLDED_LENGTH`` characters (12) in its trivial
  transforms: the text is also searched *folded* (``folding.fold``: ``\\uXXXX``/``\\xXX``
  escapes decoded, whitespace and zero-width characters dropped, letters lower-cased) for the
  folded value, reversed, rot13, base32 and base64 (so also wrapped or spaced) and hex (so also
  in mixed case); for values of 23+ characters also its first and last halves, so a value split
  in two with any text between keeps its longer piece (the shorter one, under half the value,
  is left). A folded find redacts the span of the original it was folded from.

Overlapping finds are merged, so one secret that contains or overlaps another never leaves a
piece behind. Not found: a value split into three or more pieces, or into two when it has
fewer than 23 characters; a value of fewer than 12 characters in any folded form; encodings
combined (base32 of the reversed value), gzip and other encodings; and a value whose first
characters form an escape with a literal ``%`` just before it (``%4`` + ``1abc``: a URL decoder
reads that ``A`` too). A secret that is a substring of a marker (``secret``, ``REDACTED``) can
of course still be read in the marker.

Speed: all literal forms and shape anchors go into one Aho-Corasick automaton (Rust, via
``ahocorasick_rs``), so a miss costs one pass over the text whatever the store holds; a JSON
value is searched as one joined text and rebuilt only when something was found. Values added
per call with ``with_values`` are checked with plain substring tests and never rebuild the
automaton. Text without ``%`` (the common case) costs one ``in`` test more than before. Folding
is two byte-level passes for ASCII text (``bytes.translate``) and a second automaton; the Python
pass that maps folded text back runs only after a find there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick, Implementation, MatchKind

from pincer.core.errors import UsageError
from pincer.safety.encodings import BASE64, RAW, URL, encoded_forms, percent_decoded
from pincer.safety.folding import BASE32, PART, FoldedForm, fold, fold_mapped, folded_forms
from pincer.safety.patterns import SHAPES, CredentialShape

logger = logging.getLogger(__name__)

__all__ = ["LeakScanner", "DEFAULT_MIN_ENCODED_LENGTH", "MAX_FAST_DEPTH", "MAX_PERCENT_LAYERS", "marker"]

DEFAULT_MIN_ENCODED_LENGTH = 8
# Rounds of percent-encoding undone (``%2573`` is ``s`` encoded twice); each costs one more
# decode, and only of text that still holds "%".
MAX_PERCENT_LAYERS = 3
MAX_DFA_PATTERNS = 1500  # folded forms (about 14 per secret) searched by a DFA rather than an NFA
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
        "_detector", "_finder", "_roles", "_forms", "_fallback", "_extra", "_min_length",
        "_folded", "_folded_detector", "_folded_finder", "_folded_kinds", "_extra_folded",
    )  # fmt: skip

    def __init__(self, values: Iterable[str], *, min_length: int = DEFAULT_MIN_ENCODED_LENGTH) -> None:
        if not isinstance(min_length, int) or min_length < 1:
            raise UsageError(f"min_length must be a positive integer, not {min_length!r}")
        self._min_length = min_length
        self._forms: dict[str, str] = {}
        self._folded: dict[str, FoldedForm] = {}
        for value in values:
            if not isinstance(value, str):
                raise UsageError(f"secret values must be strings, not {type(value).__name__}")
            if value:
                for form, kind in encoded_forms(value, min_length=min_length).items():
                    self._forms.setdefault(form, kind)
                for form, meaning in folded_forms(value).items():
                    self._folded.setdefault(form, meaning)
        roles: dict[str, _Role] = {form: _Role(kind, ()) for form, kind in self._forms.items()}
        for shape in SHAPES:
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
        self._extra: dict[str, _Role] = {}
        self._extra_folded: dict[str, FoldedForm] = {}
        # Folded text is searched by an automaton of its own: the literal forms above (base64,
        # the shapes' anchors) are case-sensitive, these are all lower-case.
        folded = [f for f in self._folded if _is_encodable(f)]
        self._folded_kinds = [self._folded[f] for f in folded]
        # A DFA searches about twice as fast as the default NFA but grows with the patterns
        # (1000 secrets: 2 s to build, 145 MB): used for stores of up to about 100 secrets.
        implementation = Implementation.DFA if len(folded) <= MAX_DFA_PATTERNS else None
        self._folded_detector = (
            AhoCorasick(folded, matchkind=MatchKind.LeftmostLongest, implementation=implementation) if folded else None
        )
        self._folded_finder = AhoCorasick(folded) if folded else None

    def with_values(self, extra: Iterable[str]) -> LeakScanner:
        """This scanner plus ``extra`` values (those injected during one call). Cheap: no rebuild."""
        added: dict[str, _Role] = {}
        added_folded: dict[str, FoldedForm] = {}
        for value in extra:
            # A value the scanner already knows, as a secret or as one of its forms, is covered
            # (the usual case: credentials injected from the store, raw or percent-encoded).
            if isinstance(value, str) and value and value not in self._forms:
                for form, kind in encoded_forms(value, min_length=self._min_length).items():
                    if form not in self._forms and form not in self._extra:
                        added.setdefault(form, _Role(kind, ()))
                for form, role in folded_forms(value).items():
                    if form not in self._folded and form not in self._extra_folded:
                        added_folded.setdefault(form, role)
        if not added and not added_folded:
            return self
        clone = object.__new__(LeakScanner)
        clone._detector, clone._finder = self._detector, self._finder
        clone._roles, clone._forms = self._roles, self._forms
        clone._fallback, clone._min_length = self._fallback, self._min_length
        clone._folded, clone._folded_kinds = self._folded, self._folded_kinds
        clone._folded_detector, clone._folded_finder = self._folded_detector, self._folded_finder
        clone._extra = {**self._extra, **added}
        clone._extra_folded = {**self._extra_folded, **added_folded}
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

        Returns ``value`` itself when nothing was found. Numbers whose text holds a secret
        become the redacted text; other objects are judged by ``str()``.
        """
        if isinstance(value, str):
            return self.scan_text(value)
        parts: list[str] = []
        try:
            _collect(value, parts)
        except _TooDeep:
            pass  # rebuild below; it finds what there is, or fails closed on a cycle
        else:
            if not self._spans(_JOIN.join(parts)):
                return value, 0
        counter = [0]
        try:
            scanned = self._rewrite(value, counter)
        except RecursionError:
            # Fail closed: a value too deep (or cyclic) to rebuild is not passed on at all.
            logger.warning("an output too deeply nested to redact was replaced whole")
            return _UNSCANNABLE, counter[0] + 1
        return (scanned, counter[0]) if counter[0] else (value, 0)

    # -- internals -------------------------------------------------------------------------

    def _spans(self, text: str, layers: int = MAX_PERCENT_LAYERS) -> list[tuple[int, int, str]]:
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
        for table in (self._fallback, self._extra):
            for form, role in table.items():
                start = text.find(form)
                while start >= 0:
                    _add_spans(spans, text, role, start, start + len(form))
                    start = text.find(form, start + 1)
        if layers and "%" in text:
            self._add_decoded_spans(spans, text, layers)
        if self._folded_detector is not None or self._extra_folded:
            self._add_folded_spans(spans, text)
        return spans

    def _add_folded_spans(self, spans: list[tuple[int, int, str]], text: str) -> None:
        """Finds in ``text`` folded (case, spacing, escapes, reversed, base32...: ``folding``) not
        already inside a literal find, as spans of ``text`` itself."""
        folded = _searchable(fold(text))
        if not self._folded_hit(folded):
            return
        # A hit: fold again keeping the way back, and search that text (its indexes are the
        # ones the map describes).
        mapped, starts, ends = fold_mapped(text)
        mapped = _searchable(mapped)
        found: list[tuple[int, int, FoldedForm]] = []
        if self._folded_finder is not None:
            kinds = self._folded_kinds
            for index, start, end in self._folded_finder.find_matches_as_indexes(mapped, overlapping=True):
                found.append((start, end, kinds[index]))
        for form, role in self._extra_folded.items():
            start = mapped.find(form)
            while start >= 0:
                found.append((start, start + len(form), role))
                start = mapped.find(form, start + 1)
        # Longest first, so a half inside a whole find adds nothing and the run keeps the
        # whole find's kind.
        found = [(*_extend_part(mapped, start, end, role), role) for start, end, role in found]
        found.sort(key=lambda item: (item[0] - item[1], item[2].kind == PART))
        for start, end, role in found:
            first, last = starts[start], ends[end - 1]
            if role.kind == BASE64:
                first, last = _widen_base64(text, first, last)
            elif role.kind == BASE32:
                first, last = _widen_base32(text, first, last)
            if not any(a <= first and last <= b for a, b, _ in spans):
                spans.append((first, last, role.kind))

    def _folded_hit(self, folded: str) -> bool:
        if self._folded_detector is not None and self._folded_detector.find_matches_as_indexes(folded):
            return True
        if not self._extra_folded:
            return False
        return any(form in folded for form in self._extra_folded)

    def _add_decoded_spans(self, spans: list[tuple[int, int, str]], text: str, layers: int) -> None:
        """Finds in ``text`` percent-decoded, as spans of ``text`` itself."""
        # Both readings of "+" when there is one: a literal plus, or a form-encoded space.
        for plus in (False, True) if "+" in text else (False,):
            view = percent_decoded(text, plus=plus)
            if view is None:
                return
            for start, end, kind in self._spans(view.text, layers - 1):
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


def _extend_part(text: str, start: int, end: int, role: FoldedForm) -> tuple[int, int]:
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
    kind = type(value)
    if kind is str:
        parts.append(value)
    elif kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
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
