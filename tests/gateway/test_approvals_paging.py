"""``GET /api/v1/approvals`` a page at a time (issue 35): ``limit`` (default 100, at most 1,000)
and the ``next_cursor`` of the page before; a hostile ``limit`` or ``cursor`` is a 400 naming it.

Before: ``?status=all`` read the whole approvals table into the gateway (and sent it all) on
every request, however long the table; ``limit`` and ``cursor`` were ignored. A real gateway on
127.0.0.1:0 over a real SQLite store, filled through pincer's own approval store.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from pincer.gateway.tokens import token_digest
from pincer.store.approvals import Answer
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio

AGENT_TOKEN = "pcr_paging_agent_token_0123456789abcdefgh"
CONFIG = f'[approvals]\ntimeout_s = 600\n\n[[gateway.tokens]]\nsha256 = "{token_digest(AGENT_TOKEN)}"\nsession = "agent"\n'
MADE = 230  # more than the default page (100), not a multiple of the pages walked below
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


async def test_approvals_come_a_page_at_a_time_and_the_cursor_walks_them_all_once(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG) as live:
        made = []
        for i in range(MADE):
            request = await live.pincer.approvals.create(
                session="agent" if i % 3 == 0 else "main", tool="write_note", args={"n": i}, effects=("write",),
                hosts=(), reason="asks", timeout_s=600,
            )  # fmt: skip
            made.append(request.id)
            if i % 2:
                await live.pincer.approvals.answer(request.id, Answer.DENY)
        async with live.http(headers=live.headers) as http:
            first = (await http.get("/api/v1/approvals", params={"status": "all"})).json()
            assert len(first["approvals"]) == DEFAULT_LIMIT and first["next_cursor"], first.keys()
            walked, cursor, pages = [], None, 0
            while True:
                params = {"status": "all", "limit": "70", **({"cursor": cursor} if cursor else {})}
                page = await http.get("/api/v1/approvals", params=params)
                assert page.status_code == 200, page.text
                body = page.json()
                assert len(body["approvals"]) <= 70
                walked += [a["id"] for a in body["approvals"]]
                pages += 1
                cursor = body["next_cursor"]
                if cursor is None:
                    break
            assert walked == made and pages == 4  # oldest first, each once: 70 + 70 + 70 + 20
            pending = (await http.get("/api/v1/approvals", params={"limit": "1000"})).json()
            assert [a["id"] for a in pending["approvals"]] == made[::2] and pending["next_cursor"] is None
        # A session's own requests fill its pages (filtered in the store, not after the read).
        async with live.http(headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as http:
            own = (await http.get("/api/v1/approvals", params={"status": "all", "limit": "50"})).json()
            assert [a["id"] for a in own["approvals"]] == made[::3][:50] and own["next_cursor"]
            rest = (await http.get("/api/v1/approvals", params={"status": "all", "cursor": own["next_cursor"]})).json()
            assert [a["id"] for a in rest["approvals"]] == made[::3][50:] and rest["next_cursor"] is None


def _forged(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


async def test_a_hostile_limit_or_cursor_is_a_400_naming_the_parameter(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.http(headers=live.headers) as http:
            for name, value in [
                ("limit", "0"), ("limit", "-5"), ("limit", str(MAX_LIMIT + 1)), ("limit", "9" * 400), ("limit", "ten"),
                ("limit", "1e3"), ("limit", ""),
                ("cursor", "not a cursor"), ("cursor", "x" * 5000), ("cursor", _forged([1.5, "é" * 200])), ("cursor", _forged(["NaN", "a"])),
                ("cursor", _forged([1.5])), ("cursor", _forged([1e308 * 10, "a"])), ("cursor", _forged({"a": 1})),
                ("cursor", _forged([1.5, "a" * 500])), ("cursor", "%00"),
            ]:  # fmt: skip
                answer = await http.get("/api/v1/approvals", params={"status": "all", name: value})
                assert answer.status_code == 400, (name, value, answer.status_code, answer.text[:300])
                error = answer.json()["error"]
                assert error["code"] == "invalid_request" and error["message"].startswith(f"{name}: "), error
                assert error["hint"] and (len(value) < 10 or value[:40] not in error["message"]), error  # never echoed


async def test_the_dashboards_approvals_list_is_bounded_and_refuses_a_hostile_page(pincer_home: Path) -> None:
    """Before: ``/ui/approvals`` read every waiting request, and ``?page=10000&per=200`` read the
    newest 2,000,001 answered ones (silently clamped values, never refused). The answered list now
    pages by key (``?before=``), so no page reads the rows before it."""
    from tests.gateway.ui.conftest import csrf_of

    async with live_gateway(pincer_home, config=CONFIG) as live:
        for i in range(205):  # more than the page shows (200)
            await live.pincer.approvals.create(session="main", tool="write_note", args={"n": i}, effects=("write",),
                                               hosts=(), reason="asks", timeout_s=600)  # fmt: skip
        async with live.http() as http:
            form = await http.get("/ui/login")
            signed = await http.post("/ui/login", data={"token": live.token, "csrf_token": csrf_of(form.text)})
            assert signed.status_code == 303
            # The answered list pages by key since (?before=, tests/gateway/ui/test_dashboard_keyset.py):
            # a page number is no parameter of it, and a forged position is refused like a bad size.
            assert (await http.get("/ui/approvals", params={"per": "50"})).status_code == 200
            for name, value in [("before", "0"), ("before", "9" * 300), ("before", "two"), ("per", "201"),
                                ("per", "-1"), ("per", "0")]:  # fmt: skip
                for path in ("/ui/approvals", "/ui/approvals/rows"):
                    answer = await http.get(path, params={name: value})
                    assert answer.status_code == 400, (path, name, value, answer.status_code)
                    assert f"{name}: " in answer.text, answer.text[:500]
            rows = await http.get("/ui/approvals/rows")
            assert rows.status_code == 200 and "Waiting (200)" in rows.text and "and more waiting" in rows.text
