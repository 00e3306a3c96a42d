"""``pincer approvals list`` a page at a time (issue 35: no read grows with the table).

Before: ``--all`` read the whole approvals table into the command and printed all of it; there
was no ``--limit`` or ``--cursor`` (typer refused both as unknown options). Now it pages as
``GET /api/v1/approvals`` does, with the same cursor (store/paging.py), read along the
``(created_at, id)`` index: ``--limit`` (default 100), ``--cursor`` the ``next_cursor`` the page
before gave, in ``--json`` and as a hint line after the table.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

from tests.cli.test_audit_cli import pincer

MADE = 230  # more than the default page, not a multiple of the pages walked below


def _home_with_requests(home: Path) -> list[str]:
    """A home whose store holds MADE requests (left pending by a call that will come back, so
    they stay), several made at the same instant (a page may end inside a run of equal times):
    their ids in the order the list gives them."""
    made = pincer(home, "tools", "call", "echo", "--args", json.dumps({"text": "first"}))  # makes the store
    assert made.returncode == 0, made.stderr
    rows = [(f"{(i * 7919) % MADE:03d}-{i}", float(i // 9)) for i in range(MADE)]  # ids out of time order
    with sqlite3.connect(home / "pincer.db") as conn:
        conn.executemany(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
            "VALUES (?, ?, 9e9, 'main', 'write_note', '{}', '[]', '[]', 'asks', 'pending')",
            rows,
        )
    return [rid for rid, _at in sorted(rows, key=lambda row: (row[1], row[0]))]


def test_the_list_comes_a_page_at_a_time_and_the_cursor_walks_every_request_once(tmp_path: Path) -> None:
    expected = _home_with_requests(tmp_path)
    first = pincer(tmp_path, "approvals", "list", "--all", "--json")
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert [a["id"] for a in page["approvals"]] == expected[:100] and page["next_cursor"], page.keys()
    walked, cursor, pages = [], None, 0
    while True:
        listed = pincer(tmp_path, "approvals", "list", "--all", "--limit", "70", "--json",
                        *(["--cursor", cursor] if cursor else []))  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        body = json.loads(listed.stdout)
        walked += [a["id"] for a in body["approvals"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert walked == expected and pages == 4  # 70 + 70 + 70 + 20, none skipped or repeated at equal times
    # Without --all, the pending ones (all of them here), paged alike.
    pending = json.loads(pincer(tmp_path, "approvals", "list", "--limit", "1000", "--json").stdout)
    assert [a["id"] for a in pending["approvals"]] == expected and pending["next_cursor"] is None
    human = pincer(tmp_path, "approvals", "list", "--all", "--limit", "5")
    assert human.returncode == 0, human.stderr
    (hint,) = [line for line in human.stderr.splitlines() if line.startswith("more follow: ")]
    follow = hint.removeprefix("more follow: ").split()
    assert follow[:6] == ["pincer", "approvals", "list", "--all", "--limit", "5"] and follow[6] == "--cursor"
    after = json.loads(pincer(tmp_path, "approvals", "list", "--all", "--limit", "5", "--cursor", follow[7], "--json").stdout)
    assert [a["id"] for a in after["approvals"]] == expected[5:10]


def _forged(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_a_hostile_limit_or_cursor_is_refused_naming_the_option_and_never_echoing_it(tmp_path: Path) -> None:
    _home_with_requests(tmp_path)
    for option, value in [
        ("--limit", "0"), ("--limit", "1001"), ("--limit", "9" * 300), ("--limit", "ten"), ("--limit", "-3"),
        ("--cursor", "not-a-cursor-at-all"), ("--cursor", "x" * 5000), ("--cursor", _forged([1.5, "a" * 500])),
        ("--cursor", _forged(["NaN", "secret-looking-id"])), ("--cursor", _forged({"created_at": 1})),
        ("--cursor", _forged([1e308 * 10, "abc"])), ("--cursor", "é" * 30),
    ]:  # fmt: skip
        for as_json in (True, False) if option == "--cursor" and len(value) > 1000 else (True,):
            refused = pincer(tmp_path, "approvals", "list", "--all", f"{option}={value}", *(["--json"] if as_json else []))
            assert refused.returncode == 2, (option, value, refused.returncode, refused.stderr[-500:])
            out = refused.stdout + refused.stderr
            assert len(value) < 10 or value[:40] not in out, (option, out[-500:])  # never echoed
            if as_json:
                error = json.loads(refused.stdout)["error"]
                assert error["message"].startswith(f"{option}: ") and error["hint"], error
            else:
                assert f"{option}: " in refused.stderr, refused.stderr[-500:]
