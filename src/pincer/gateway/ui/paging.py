"""Pages of a list, newest first: ``?page=N`` (from 1) and ``?per=N`` rows, links that keep the
filters. Plain links, so paging works without JavaScript."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

__all__ = ["MAX_PER_PAGE", "Paged", "filter_value", "page_request", "paged", "strict_page_request"]

MAX_PER_PAGE = 200
MAX_PAGE = 10_000
MAX_FILTER_CHARS = 256  # a filter longer than any tool, session or skill name matches nothing anyway


@dataclass(frozen=True, kw_only=True, slots=True)
class PageRequest:
    number: int
    per: int

    @property
    def wanted(self) -> int:
        """Rows to read to fill this page and know whether an older one exists."""
        return self.number * self.per + 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Paged:
    rows: list[Any]
    number: int
    newer: str | None
    older: str | None
    shown: str


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        number = int(value or "")
    except ValueError:
        return default
    return min(high, max(low, number))


def filter_value(request: Request, name: str) -> str:
    """The list filter ``?name=`` as typed, cut to a bounded length, empty when absent."""
    return request.query_params.get(name, "")[:MAX_FILTER_CHARS].strip()


def page_request(request: Request, *, per: int) -> PageRequest:
    q = request.query_params
    return PageRequest(number=_int(q.get("page"), 1, 1, MAX_PAGE), per=_int(q.get("per"), per, 1, MAX_PER_PAGE))


def strict_page_request(request: Request, *, per: int, most_rows: int) -> PageRequest:
    """``?page=`` and ``?per=`` of a list read from a table that may be long: whole numbers in
    range, and no page past the first ``most_rows`` rows (a page reads every row before it);
    otherwise ``QueryRefused``, naming the parameter (its value is never echoed)."""
    from pincer.gateway.ui.auth import QueryRefused

    def number(name: str, default: int, high: int) -> int:
        raw = request.query_params.get(name, "").strip()
        if not raw:
            return default
        if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(high))) or not 1 <= int(raw) <= high:
            raise QueryRefused(f"{name}: must be a whole number from 1 to {high:,}")
        return int(raw)

    wanted = PageRequest(number=number("page", 1, MAX_PAGE), per=number("per", per, MAX_PER_PAGE))
    if wanted.number * wanted.per > most_rows:
        raise QueryRefused(f"page: only the newest {most_rows:,} rows are paged through here; narrow the list with its filters")
    return wanted


def paged(rows: Sequence[Any], page: PageRequest, path: str, filters: Mapping[str, str], *, default_per: int,
          noun: str) -> Paged:  # fmt: skip
    """Page ``page`` of ``rows`` (newest first), with links to the newer and older pages."""
    start = (page.number - 1) * page.per
    shown = list(rows[start : start + page.per])
    kept = {k: v for k, v in filters.items() if v}
    if page.per != default_per:
        kept["per"] = str(page.per)

    def link(number: int) -> str:
        query = urlencode({**kept, **({"page": str(number)} if number > 1 else {})})
        return path + ("?" + query if query else "")

    if shown:
        what = f"{noun} {start + 1}–{start + len(shown)}" + ("" if len(rows) > start + len(shown) else f" of {len(rows)}")
    else:
        what = f"no {noun} here"
    return Paged(
        rows=shown, number=page.number, shown=what,
        newer=link(page.number - 1) if page.number > 1 else None,
        older=link(page.number + 1) if len(rows) > start + page.per else None,
    )  # fmt: skip
