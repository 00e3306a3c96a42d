"""Pages of a list, newest first, with links that keep the filters (plain links, so paging works
without JavaScript), by key (keyset): ``?before=CURSOR`` and ``?per=N``. The cursor is the sort
key of the last row a page showed, made opaque (url-safe base64 of a JSON list); the next page is
read along an index from just past it, so a page deep in the list reads only its own rows however
many lie before it. (Paging by number, ``?page=N``, read the rows of every page before N too; no
list pages that way any more.)"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

__all__ = [
    "MAX_PER_PAGE", "KeysetRequest", "Paged", "cursor_of", "filter_value", "keyset_paged", "keyset_request",
]  # fmt: skip

MAX_PER_PAGE = 200
MAX_FILTER_CHARS = 256  # a filter longer than any tool, session or skill name matches nothing anyway
# Ours are well under (a time and a 32-character id); the bound still holds any key of MAX_KEY_TEXT
# characters, four UTF-8 bytes each, in base64 (723 characters). Longer is not one of ours.
MAX_CURSOR_CHARS = 1024
MAX_KEY_TEXT = 128  # a text part of a key: an id, never longer
_CURSOR = re.compile(r"[A-Za-z0-9_-]+")
KeyPart = float | int | str


@dataclass(frozen=True, kw_only=True, slots=True)
class Paged:
    """A page of a list: ``newer`` links back to the newest page (every list pages by key, so
    there is no page just before this one to link to), ``older`` on past the last shown row."""

    rows: list[Any]
    newer: str | None
    older: str | None
    shown: str


def filter_value(request: Request, name: str) -> str:
    """The list filter ``?name=`` as typed, cut to a bounded length, empty when absent."""
    return request.query_params.get(name, "")[:MAX_FILTER_CHARS].strip()


@dataclass(frozen=True, kw_only=True, slots=True)
class KeysetRequest:
    before: tuple[KeyPart, ...] | None  # the sort key of the last row the page before showed
    per: int

    @property
    def wanted(self) -> int:
        """Rows to read: this page and one more (whether an older page exists)."""
        return self.per + 1


def cursor_of(key: Sequence[KeyPart]) -> str:
    """The opaque ``?before=`` value for a row's sort key."""
    text = json.dumps(list(key), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _key_of(cursor: str, kinds: Sequence[type]) -> tuple[KeyPart, ...] | None:
    """The key ``cursor`` holds when it is one of ours for a key of ``kinds``; None otherwise."""
    if not (0 < len(cursor) <= MAX_CURSOR_CHARS and _CURSOR.fullmatch(cursor)):
        return None
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        parts = json.loads(raw.decode(), parse_constant=lambda _: None)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(parts, list) or len(parts) != len(kinds):
        return None
    key = [_part(part, kind) for part, kind in zip(parts, kinds, strict=True)]
    return None if None in key else tuple(k for k in key if k is not None)


def _part(part: object, kind: type) -> KeyPart | None:
    """One part of a key as ``kind`` (JSON's true and false are not numbers here), or None."""
    if isinstance(part, bool):
        return None
    if kind is float and isinstance(part, int | float) and math.isfinite(part):
        return float(part)
    if kind is int and isinstance(part, int) and abs(part) < 2**63:
        return part
    if kind is str and isinstance(part, str) and 0 < len(part) <= MAX_KEY_TEXT:
        return part
    return None


def _whole_number(request: Request, name: str, default: int, high: int) -> int:
    from pincer.gateway.ui.auth import QueryRefused

    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(high))) or not 1 <= int(raw) <= high:
        raise QueryRefused(f"{name}: must be a whole number from 1 to {high:,}")
    return int(raw)


def keyset_request(request: Request, *, per: int, kinds: Sequence[type], path: str) -> KeysetRequest:
    """``?before=`` and ``?per=`` of a list paged by key (``kinds``: the types of its sort key's
    parts, e.g. ``(float, str)``). A cursor this list did not give out, or a ``per`` that is not a
    whole number in range, is ``QueryRefused`` naming the parameter and what to do; the value
    itself is never echoed."""
    from pincer.gateway.ui.auth import QueryRefused

    size = _whole_number(request, "per", per, MAX_PER_PAGE)
    raw = request.query_params.get("before")
    if raw is None or not raw.strip():
        return KeysetRequest(before=None, per=size)
    key = _key_of(raw.strip(), kinds)
    if key is None:
        raise QueryRefused(
            f"before: not a position in this list (it is the cursor an Older link carries, not a value to type); "
            f"follow the list's Older links from {path}"
        )
    return KeysetRequest(before=key, per=size)


def keyset_paged(rows: Sequence[Any], wanted: KeysetRequest, path: str, filters: Mapping[str, str], *,
                 key: Callable[[Any], Sequence[KeyPart]], default_per: int, noun: str) -> Paged:  # fmt: skip
    """The page of ``rows`` (read with ``wanted.wanted`` as the limit, newest first from just
    past ``wanted.before``, the list's filters in that read): an Older link carrying the last
    shown row's key when more rows were read than shown, and a link back to the newest page when
    this one is not it."""
    shown = list(rows[: wanted.per])
    kept = {k: v for k, v in filters.items() if v}
    if wanted.per != default_per:
        kept["per"] = str(wanted.per)

    def link(extra: dict[str, str]) -> str:
        query = urlencode({**kept, **extra})
        return path + ("?" + query if query else "")

    onward = key(shown[-1]) if len(rows) > wanted.per else None
    if not shown:
        what = f"no {noun} here"
    elif wanted.before is None:
        what = f"the newest {len(shown)} {noun}" if onward is not None else f"{len(shown)} {noun}, all there are"
    else:
        what = f"{len(shown)} older {noun}" + ("" if onward is not None else ", the oldest")
    return Paged(
        rows=shown, shown=what,
        newer=link({}) if wanted.before is not None else None,
        older=link({"before": cursor_of(onward)}) if onward is not None else None,
    )  # fmt: skip
