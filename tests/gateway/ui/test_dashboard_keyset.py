"""The answered approvals page by key (issue 35 item 4: a gateway that never stalls).

Before, ``/ui/approvals?page=N`` read every answered row of the pages before N (a page 400 deep
read 8,000 rows) and refused any page past the newest 10,000 rows. Now the Older link carries a
``?before=`` cursor (the last shown row's ``(closed_at, id)``) and a page reads its own rows along
the ``(closed_at, id)`` index, however deep. A real gateway on 127.0.0.1:0 over HTTP, signed in
with its token; what a page read is the row count of the store call the page made.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.store.sql import Sql
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.ui.conftest import csrf_of

pytestmark = pytest.mark.anyio

ROWS = 450
PER = 20  # the page's default (approvals.RECENT_ANSWERED)
_INSERT = Sql(
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
    "answered_at, session_kind, detail, closed_at) VALUES (:id, :created, :expires, 'main', 'write_file', '{}', "
    "'[]', '[]', 'r', :status, :answered, 'main', '{}', :closed)"
)
_OLDER = re.compile(r'<a class="button" href="([^"]+)" rel="next">Older</a>')
_NEWEST = re.compile(r'<a class="button" href="([^"]+)" rel="prev">Newest</a>')


async def _seed(live: LiveGateway) -> list[str]:
    """``ROWS`` answered or expired requests, three at each closing time (ties are broken by id);
    their ids, newest first as the page lists them. Created in the opposite order to closing,
    so an order by creation would show up."""
    now = time.time()
    rows = []
    for n in range(ROWS):
        closed = now - 3_600 + n // 3
        status = ("deny", "allow_once", "expired")[n % 3]
        rows.append({"id": f"{n:04d}" + "ab" * 14, "created": now - 7_200 - n, "expires": closed,
                     "status": status, "answered": None if status == "expired" else closed, "closed": closed})  # fmt: skip
    await live.pincer.db.execute_many(_INSERT, rows)
    return [r["id"] for r in sorted(rows, key=lambda r: (r["closed"], r["id"]), reverse=True)]


@asynccontextmanager
async def _signed_in(live: LiveGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with live.http() as http:
        form = await http.get("/ui/login")
        signed = await http.post("/ui/login", data={"token": live.token, "csrf_token": csrf_of(form.text)})
        assert signed.status_code == 303, signed.text
        yield http


def _answered_ids(page: str) -> list[str]:
    answered = page.split("Answered and expired", 1)[1]
    return re.findall(r'data-approval-id="([0-9a-z]+)"', answered)


def _spy(target: object, method: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], int]]:
    """The reads the pages make through ``target.method``: their arguments and how many rows each
    returned (the real store method runs; this only writes down what it was asked and gave)."""
    calls: list[tuple[dict[str, Any], int]] = []
    real: Callable[..., Awaitable[list[Any]]] = getattr(target, method)

    async def spied(**kwargs: Any) -> list[Any]:
        rows = await real(**kwargs)
        calls.append((kwargs, len(rows)))
        return rows

    monkeypatch.setattr(target, method, spied)
    return calls


async def _walk(http: httpx.AsyncClient, url: str, *, kept: str = "") -> list[str]:
    """The pages from ``url`` on, following each Older link to the end: every Older link a
    ``before=`` cursor (never a page number) keeping ``kept``, every page after the first
    linking back to ``url`` as Newest."""
    pages: list[str] = []
    next_url: str | None = url
    while next_url is not None:
        answer = await http.get(next_url)
        assert answer.status_code == 200, (next_url, answer.text[:500])
        pages.append(answer.text)
        newest = _NEWEST.search(answer.text)
        assert (newest is None) == (len(pages) == 1), next_url  # the first page is the newest
        if newest:
            assert html.unescape(newest.group(1)) == url
        older = _OLDER.search(answer.text)
        next_url = html.unescape(older.group(1)) if older else None
        assert next_url is None or ("before=" in next_url and "page=" not in next_url and kept in next_url)
    return pages


async def test_older_links_visit_every_answered_request_once_and_a_deep_page_reads_only_its_own(
    pincer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_gateway(pincer_home) as live:
        expected = await _seed(live)
        calls = _spy(live.pincer.approvals, "answered", monkeypatch)
        async with _signed_in(live) as http:
            walked = await _walk(http, "/ui/approvals")
            seen: list[str] = []
            for page in walked:
                ids = _answered_ids(page)
                assert 0 < len(ids) <= PER, ids
                seen += ids
            pages = len(walked)
            assert seen == expected  # every row once, newest first, none skipped at equal times
            assert pages == -(-ROWS // PER)
            # Each page, the 23rd (440 rows deep) as much as the first, read its rows and one more.
            assert len(calls) == pages
            for kwargs, read in calls:
                assert kwargs["limit"] == PER + 1 and read <= PER + 1, calls
            assert calls[0][0]["before"] is None and all(k["before"] is not None for k, _ in calls[1:])
            last_before = calls[-1][0]["before"]
            assert last_before[1] == expected[(pages - 1) * PER - 1]  # the cursor is the row the page before ended on
            assert calls[-1][1] == ROWS - (pages - 1) * PER


async def test_a_forged_cursor_is_refused_naming_before_and_never_echoed(
    pincer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pincer.gateway.ui.paging import cursor_of

    async with live_gateway(pincer_home) as live:
        await _seed(live)
        calls = _spy(live.pincer.approvals, "answered", monkeypatch)
        async with _signed_in(live) as http:
            for forged in ("not-a-cursor!", "AAAA", cursor_of(["1.5", "x"]), cursor_of([1.5]),
                           cursor_of([1.5, "x", 3]), "eyJ" + "A" * 600, "W05hTiwieCJd"):  # fmt: skip
                answer = await http.get("/ui/approvals", params={"before": forged})
                assert answer.status_code == 400, (forged, answer.text[:300])
                text = html.unescape(answer.text)
                assert "before: not a position in this list" in text and "Older links from /ui/approvals" in text
                assert forged not in text, forged
            bad_per = await http.get("/ui/approvals", params={"per": "0"})
            assert bad_per.status_code == 400 and "per: must be a whole number from 1 to 200" in bad_per.text
            assert calls == []  # nothing was read for a refused address
            good = await http.get("/ui/approvals", params={"before": cursor_of([time.time(), "zz"]), "per": "7"})
            assert good.status_code == 200 and len(_answered_ids(good.text)) == 7


AUDIT_RECORDS = 130
AUDIT_PER = 25


async def test_the_audit_pages_by_record_id_and_a_deep_page_reads_only_its_own(
    pincer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/ui/audit`` pages by key too: before, ``?page=N`` read the newest N*per records (and a
    page past 10,000 records was out of reach)."""
    from pincer.gateway.ui.paging import cursor_of
    from pincer.store.audit import AuditEntry

    async with live_gateway(pincer_home) as live:
        entries = [AuditEntry(session="main", caller="test", tool=f"tool_{n % 4}", decision="allow", reason="seeded",
                              outcome="ok", ts=time.time()) for n in range(AUDIT_RECORDS)]  # fmt: skip
        await live.pincer.audit.append_with(entries)
        async with _signed_in(live) as http:
            expected = [r.id for r in reversed(await live.pincer.audit.records())]
            assert len(expected) >= AUDIT_RECORDS
            calls = _spy(live.pincer.audit, "records", monkeypatch)
            seen = [int(i) for page in await _walk(http, f"/ui/audit?per={AUDIT_PER}")
                    for i in re.findall(r'<td data-label="Record"><a href="/ui/audit/(\d+)">', page)]  # fmt: skip
            assert seen == expected
            pages = -(-len(expected) // AUDIT_PER)
            assert len(calls) == pages and all(k["limit"] == AUDIT_PER + 1 and n <= AUDIT_PER + 1 for k, n in calls)
            assert [k["before_id"] for k, _ in calls] == [None] + [expected[p * AUDIT_PER - 1] for p in range(1, pages)]
            for forged in ("abc", cursor_of([1.5, "x"]), cursor_of(["7"]), cursor_of([True])):
                refused = await http.get("/ui/audit", params={"before": forged})
                assert refused.status_code == 400 and "before: not a position in this list" in html.unescape(refused.text)
                assert "Older links from /ui/audit" in html.unescape(refused.text)


RUNS = 130
RUNS_PER = 25
_RUN_ID = re.compile(r'<td data-label="Run" class="wide"><a href="/ui/runs/([0-9a-z]+)">')


async def test_the_runs_list_pages_by_key_and_a_deep_page_reads_only_its_own(
    pincer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/ui/runs`` pages by key: before, ``?page=N`` read the newest N*per runs (page 6 of 25
    read 151 rows to show 25). Now each Older link carries the last shown run's
    ``(created_at, id)`` and a page reads its own runs and one more, however deep. Runs created
    at one instant (ten at a time here, ids out of creation order) are neither skipped nor
    repeated across a page's edge. A page filtered by status or skill asks the store for its page
    and one more matching run (before: a window of 5,000 runs, filtered in Python)."""
    from pincer.gateway.ui.paging import cursor_of

    async with live_gateway(pincer_home) as live:
        base = time.time() - 3_600
        made = [(base + n // 10, f"{(n * 37) % RUNS:04d}" + "cd" * 14) for n in range(RUNS)]
        daily_ids = {run_id for n, (_, run_id) in enumerate(made) if n % 13 == 0}  # a few in each window of 30
        for at, run_id in made:
            await live.pincer.runs.create(run_id=run_id, skill="daily" if run_id in daily_ids else None, params={},
                                          message="m", trigger="test", session="main", provider="p", model="m",
                                          now=at)  # fmt: skip
            await live.pincer.runs.update(run_id, status="done")
        expected = [run_id for _, run_id in sorted(made, reverse=True)]
        calls = _spy(live.pincer.runs, "list", monkeypatch)
        async with _signed_in(live) as http:
            walked = await _walk(http, f"/ui/runs?per={RUNS_PER}", kept=f"per={RUNS_PER}")
            seen = [run_id for page in walked for run_id in _RUN_ID.findall(page)]
            pages = len(walked)
            assert seen == expected  # every run once, newest first, none skipped at equal times
            assert pages == -(-RUNS // RUNS_PER) == len(calls)
            assert all(k["limit"] == RUNS_PER + 1 and n <= RUNS_PER + 1 for k, n in calls), calls
            assert [k["before"] for k, _ in calls][1:] == [
                (made_at, run_id) for made_at, run_id in sorted(made, reverse=True)[RUNS_PER - 1 : -1 : RUNS_PER]
            ]
            assert calls[0][0]["before"] is None and calls[-1][1] == RUNS - (pages - 1) * RUNS_PER

            # Filtered by skill (and by status): the matches, every one once, newest first, each
            # page's read asking the store for its page and one more run (the filter is in SQL).
            for query, matching in (("skill=daily", daily_ids), ("status=done&skill=daily", daily_ids),
                                    ("status=failed", set())):  # fmt: skip
                calls.clear()
                walked = await _walk(http, f"/ui/runs?{query}&per=3", kept=query.split("&")[-1])
                shown = [run_id for page in walked for run_id in _RUN_ID.findall(page)]
                assert shown == [r for r in expected if r in matching], query
                assert len(calls) == max(1, -(-len(matching) // 3)), (query, calls)
                assert all(k["limit"] == 4 and n <= 4 for k, n in calls), calls
                for k, _ in calls:
                    assert (k["skill"], k["status"]) == (("daily" if "skill" in query else None),
                                                         query.split("status=")[1].split("&")[0] if "status" in query else None)  # fmt: skip

            calls.clear()
            for forged in ("abc", cursor_of([1.5]), cursor_of(["1.5", "x"]), cursor_of([1.5, 7]), cursor_of([True, "x"])):
                refused = await http.get("/ui/runs", params={"before": forged})
                text = html.unescape(refused.text)
                assert refused.status_code == 400 and "before: not a position in this list" in text, forged
                assert "Older links from /ui/runs" in text and forged not in text, forged
            assert calls == []  # nothing was read for a refused address


async def test_a_filtered_audit_page_reads_its_page_and_one_more(pincer_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/ui/audit?decision=&since=&until=``: the filters are in the store's read, so each page asks
    for ``per`` and one more matching record, every match once, newest first (before: a window of
    10,000 records before the cursor, filtered in Python, a page of the window's matches)."""
    from pincer.store.audit import AuditEntry

    async with live_gateway(pincer_home) as live:
        base = 1_000_000.0
        entries = [AuditEntry(session="main", caller="test", tool="echo", decision=("allow", "deny", "ask")[n % 3],
                              reason="seeded", outcome="ok", ts=base + n // 4) for n in range(AUDIT_RECORDS)]  # fmt: skip
        await live.pincer.audit.append_with(entries)
        async with _signed_in(live) as http:
            everything = list(reversed(await live.pincer.audit.records()))
            calls = _spy(live.pincer.audit, "records", monkeypatch)
            for query, keep in (("decision=deny", lambda r: r.decision == "deny"),
                                (f"since={base + 10}&until={base + 20}", lambda r: base + 10 <= r.ts <= base + 20),
                                (f"decision=ask&since={base + 25}", lambda r: r.decision == "ask" and r.ts >= base + 25)):  # fmt: skip
                calls.clear()
                walked = await _walk(http, f"/ui/audit?{query}&per=6", kept=query.split("&")[0])
                seen = [int(i) for page in walked
                        for i in re.findall(r'<td data-label="Record"><a href="/ui/audit/(\d+)">', page)]  # fmt: skip
                wanted = [r.id for r in everything if keep(r)]
                assert seen == wanted and wanted, query
                assert len(calls) == -(-len(wanted) // 6), (query, calls)
                assert all(k["limit"] == 7 and n <= 7 for k, n in calls), calls
                assert "searches" not in "".join(walked)  # no window to search on past


async def test_the_overview_reads_only_the_days_records(pincer_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The overview's last 24 hours: the time bound is in the read (before, the newest 10,000
    records were read, whatever their age, and the day's kept in Python)."""
    from pincer.store.audit import AuditEntry

    async with live_gateway(pincer_home) as live:
        now = time.time()
        old = [AuditEntry(session="main", caller="test", tool="echo", decision="allow", reason="seeded", outcome="ok",
                          ts=now - 3 * 86_400 - n) for n in range(150)]  # fmt: skip
        recent = [AuditEntry(session="main", caller="test", tool="echo", decision="deny", reason="seeded",
                             outcome="denied", ts=now - 60) for _ in range(3)]  # fmt: skip
        await live.pincer.audit.append_with(old + recent)
        async with _signed_in(live) as http:
            day = sum(1 for r in await live.pincer.audit.records() if r.ts >= now - 86_400)
            calls = _spy(live.pincer.audit, "records", monkeypatch)
            answer = await http.get("/ui/")
            assert answer.status_code == 200, answer.text[:300]
            assert len(calls) == 1 and calls[0][1] == day < 150, calls
            assert calls[0][0]["since"] is not None
