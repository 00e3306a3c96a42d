"""Keyset pages of a list: ``limit`` rows (a bounded default) after the ``cursor`` the page
before gave as ``next_cursor``. A cursor is the last row's ``(time, id)`` (the time the list is
ordered by: created, or closed), JSON in URL-safe base64: opaque to callers, and read back only
as those two values (anything else is an error naming the parameter, never echoing the value: a
query string or a command line may hold anything). In the store, below both the REST API
(``GET /api/v1/approvals``) and the CLI (``pincer approvals list``), which page alike."""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass

from pincer.core.errors import UsageError

__all__ = ["DEFAULT_PAGE_LIMIT", "MAX_PAGE_LIMIT", "Cursor", "encode_cursor", "parse_cursor", "parse_limit"]

DEFAULT_PAGE_LIMIT = 100
MAX_PAGE_LIMIT = 1000
_MAX_CURSOR_CHARS = 1200  # an encoded (created_at, id): under 100 for a hex id, under 1,100 for any of _MAX_ID_CHARS
_MAX_ID_CHARS = 128


@dataclass(frozen=True, kw_only=True, slots=True)
class Cursor:
    """Where a page ends: its last row's time (the one the list is ordered by) and id (ties
    broken by id)."""

    at: float
    id: str


def parse_limit(raw: str | None, *, name: str = "limit") -> int:
    """``?limit=`` (``name``: the parameter as the caller spells it): a whole number from 1 to
    ``MAX_PAGE_LIMIT``; absent: the default."""
    if raw is None:
        return DEFAULT_PAGE_LIMIT
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_PAGE_LIMIT))) or not 1 <= int(text) <= MAX_PAGE_LIMIT:
        raise UsageError(
            f"{name}: must be a whole number from 1 to {MAX_PAGE_LIMIT}",
            hint=f"leave it out for {DEFAULT_PAGE_LIMIT}, and follow next_cursor for the rest",
        )
    return int(text)


def encode_cursor(cursor: Cursor) -> str:
    raw = json.dumps([cursor.at, cursor.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_cursor(raw: str | None, *, name: str = "cursor") -> Cursor | None:
    """``?cursor=`` (``name``: the parameter as the caller spells it): a ``next_cursor`` pincer
    gave, as it gave it; absent: the first page."""
    if raw is None:
        return None
    bad = UsageError(
        f"{name}: not a next_cursor pincer gave",
        hint=f"pass next_cursor from the page before as it is, or leave {name} out for the first page",
    )
    if not raw or len(raw) > _MAX_CURSOR_CHARS or not raw.isascii():
        raise bad
    try:
        value = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if not (isinstance(value, list) and len(value) == 2):
        raise bad
    created_at, row_id = value
    if isinstance(created_at, bool) or not isinstance(created_at, int | float) or not math.isfinite(created_at):
        raise bad
    if not isinstance(row_id, str) or not 0 < len(row_id) <= _MAX_ID_CHARS:
        raise bad
    return Cursor(at=float(created_at), id=row_id)
