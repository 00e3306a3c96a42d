"""The dashboard's small parsers of client text, under arbitrary input: an audit time filter is
a number or nothing, never an exception; a sign-in's ``next`` is a dashboard path or the
overview, never another site."""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pincer.gateway.ui.audit import _parse_time
from pincer.gateway.ui.auth import next_of


@given(st.text(max_size=200))
def test_a_time_filter_is_a_number_or_nothing(text: str) -> None:
    parsed = _parse_time(text)
    assert parsed is None or (isinstance(parsed, float) and math.isfinite(parsed))


def test_a_time_filter_reads_datetime_local_as_utc_and_unix_seconds() -> None:
    assert _parse_time("1970-01-01T00:01") == 60.0
    assert _parse_time("  1700000000.5 ") == 1700000000.5
    assert _parse_time("") is None and _parse_time("yesterday") is None
    assert _parse_time("nan") is None and _parse_time("-inf") is None and _parse_time("1e400") is None


@given(st.one_of(st.none(), st.text(max_size=200), st.text(alphabet="/.:ui%@\\ab", max_size=40).map(lambda t: "/ui" + t)))
def test_next_is_always_a_dashboard_path(value: str | None) -> None:
    target = next_of(value)
    assert target.startswith("/ui") and "//" not in target and ".." not in target and "\\" not in target
    assert target == "/ui/" or target == value


@given(st.text(max_size=300), st.booleans(), st.booleans())
def test_a_tool_result_is_read_back_out_of_its_envelope(text: str, trusted: bool, error: bool) -> None:
    import json

    from pincer.gateway.ui.conversation import tool_result
    from pincer.llm.prompt import defuse, wrap_output

    result = tool_result(wrap_output("echo", text, trusted=trusted, error=error), is_error=False)
    assert result.trusted is trusted and result.is_error is error
    if result.is_text:
        assert result.value == defuse(text)
    else:
        assert result.value == json.loads(defuse(text))


@given(st.text(max_size=120))
def test_the_grant_forms_hosts_become_host_patterns_or_say_what_is_wrong(hosts: str) -> None:
    from pincer.gateway.ui.grants import _grant_from
    from pincer.safety.hosts import HostPattern

    made = _grant_from({"tool": "http", "mode": "allow", "hosts": hosts}, ["network"], "ui:main")
    if isinstance(made, str):
        assert made.startswith("hosts: ")
    else:
        for host in made.hosts or ():
            HostPattern.parse(host)
        assert made.hosts is None or len(made.hosts) >= 1


def _keyset(before: str | None, per: str | None = None) -> Any:
    from urllib.parse import urlencode

    from starlette.requests import Request

    from pincer.gateway.ui.paging import keyset_request

    query = urlencode({k: v for k, v in (("before", before), ("per", per)) if v is not None})
    request = Request({"type": "http", "query_string": query.encode(), "headers": []})
    return keyset_request(request, per=20, kinds=(float, str), path="/ui/approvals")


_CURSORISH = st.one_of(
    st.text(max_size=80), st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", max_size=80),
    st.binary(max_size=60).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    st.lists(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)), max_size=4).map(
        lambda parts: base64.urlsafe_b64encode(json.dumps(parts).encode()).decode()),
)  # fmt: skip


@given(before=st.one_of(st.none(), _CURSORISH), per=st.one_of(st.none(), st.text(max_size=6), st.integers().map(str)))
def test_a_before_cursor_is_a_key_of_the_lists_shape_or_refused_naming_the_parameter(before: str | None,
                                                                                      per: str | None) -> None:  # fmt: skip
    """Any text as ``?before=`` (and ``?per=``): a finite time and a non-empty id, or QueryRefused
    that names the parameter, says what to do, and never echoes the value."""
    from pincer.gateway.ui.auth import QueryRefused
    from pincer.gateway.ui.paging import MAX_PER_PAGE

    try:
        wanted = _keyset(before, per)
    except QueryRefused as exc:
        assert exc.message.startswith(("before: ", "per: ")), exc.message
        if exc.message.startswith("before: "):
            assert "Older links from /ui/approvals" in exc.message
            assert before is None or len(before.strip()) < 8 or before.strip() not in exc.message
    else:
        assert 1 <= wanted.per <= MAX_PER_PAGE
        if wanted.before is not None:
            at, approval_id = wanted.before
            assert isinstance(at, float) and math.isfinite(at) and isinstance(approval_id, str) and approval_id


@given(at=st.floats(allow_nan=False, allow_infinity=False), approval_id=st.text(min_size=1, max_size=128))
def test_a_cursor_gives_back_the_key_it_was_made_from(at: float, approval_id: str) -> None:
    from pincer.gateway.ui.paging import cursor_of

    cursor = cursor_of([at, approval_id])
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    assert _keyset(cursor).before == (at, approval_id)


@given(times=st.lists(st.integers(0, 5), max_size=60), per=st.integers(1, 9))
def test_keyset_pages_cover_every_row_once_in_order_at_equal_keys(times: list[int], per: int) -> None:
    """The pages a store read by key makes, followed by their Older links: every row once, newest
    first, ties broken by id; the Newest link goes back to the top with the filters kept."""
    from urllib.parse import parse_qs, urlsplit

    from pincer.gateway.ui.paging import KeysetRequest, keyset_paged

    rows = sorted(((float(t), f"id{n:03d}") for n, t in enumerate(times)), reverse=True)
    seen: list[tuple[float, str]] = []
    wanted = KeysetRequest(before=None, per=per)
    while True:
        read = [r for r in rows if wanted.before is None or r < wanted.before][: wanted.wanted]
        shown = keyset_paged(read, wanted, "/ui/x", {"tool": "echo"}, key=lambda r: r, default_per=20, noun="rows")
        seen += shown.rows
        assert (shown.newer is None) == (wanted.before is None)
        if shown.newer:
            assert parse_qs(urlsplit(shown.newer).query) == {"tool": ["echo"], "per": [str(per)]}
        if not shown.older:
            break
        query = parse_qs(urlsplit(shown.older).query)
        assert query["tool"] == ["echo"] and query["per"] == [str(per)]
        wanted = _keyset(query["before"][0], str(per))
    assert seen == rows


def test_a_cursor_holds_the_longest_key_of_the_widest_characters() -> None:
    """Found by test_a_cursor_gives_back_the_key_it_was_made_from: a 128-character id of characters
    outside the BMP made a cursor over the parser's bound (JSON's \\u escapes: 12 characters each),
    so its own Older link was refused."""
    from pincer.gateway.ui.paging import MAX_KEY_TEXT, cursor_of

    for at, approval_id in ((0.0, "\U0001ca29" * MAX_KEY_TEXT), (-1.7976931348623157e308, "𐀀" * MAX_KEY_TEXT)):
        assert _keyset(cursor_of([at, approval_id])).before == (at, approval_id)
