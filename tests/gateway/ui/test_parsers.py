"""The dashboard's small parsers of client text, under arbitrary input: an audit time filter is
a number or nothing, never an exception; a sign-in's ``next`` is a dashboard path or the
overview, never another site."""

from __future__ import annotations

import math

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


@given(page=st.one_of(st.none(), st.text(max_size=12), st.integers().map(str)),
       per=st.one_of(st.none(), st.text(max_size=12), st.integers().map(str)))  # fmt: skip
def test_a_page_request_is_always_in_bounds(page: str | None, per: str | None) -> None:
    from urllib.parse import urlencode

    from starlette.requests import Request

    from pincer.gateway.ui.paging import MAX_PAGE, MAX_PER_PAGE, page_request

    query = urlencode({k: v for k, v in (("page", page), ("per", per)) if v is not None})
    wanted = page_request(Request({"type": "http", "query_string": query.encode(), "headers": []}), per=50)
    assert 1 <= wanted.number <= MAX_PAGE and 1 <= wanted.per <= MAX_PER_PAGE


@given(total=st.integers(0, 60), per=st.integers(1, 9))
def test_pages_cover_every_row_once_and_link_each_other(total: int, per: int) -> None:
    from urllib.parse import parse_qs, urlsplit

    from pincer.gateway.ui.paging import PageRequest, paged

    rows = list(range(total))
    seen: list[int] = []
    number: int | None = 1
    while number is not None:
        shown = paged(rows, PageRequest(number=number, per=per), "/ui/x", {"tool": "echo"}, default_per=50, noun="rows")
        seen += shown.rows
        if shown.older:
            query = parse_qs(urlsplit(shown.older).query)
            assert query["tool"] == ["echo"] and query["per"] == [str(per)]
            number = int(query["page"][0])
        else:
            number = None
    assert seen == rows


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


@given(page=st.one_of(st.none(), st.text(max_size=12), st.integers().map(str)),
       per=st.one_of(st.none(), st.text(max_size=12), st.integers().map(str)))  # fmt: skip
def test_a_strict_page_request_is_in_bounds_or_refused_naming_the_parameter(page: str | None, per: str | None) -> None:
    from urllib.parse import urlencode

    from starlette.requests import Request

    from pincer.gateway.ui.auth import QueryRefused
    from pincer.gateway.ui.paging import MAX_PER_PAGE, strict_page_request

    query = urlencode({k: v for k, v in (("page", page), ("per", per)) if v is not None})
    try:
        wanted = strict_page_request(Request({"type": "http", "query_string": query.encode(), "headers": []}), per=20,
                                     most_rows=10_000)  # fmt: skip
    except QueryRefused as exc:
        assert exc.message.startswith(("page: ", "per: "))
    else:
        assert 1 <= wanted.per <= MAX_PER_PAGE and wanted.number * wanted.per <= 10_000
