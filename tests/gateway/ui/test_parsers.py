"""The dashboard's small parsers of client text, under arbitrary input: an audit time filter is
a number or nothing, never an exception; a sign-in's ``next`` is a dashboard path or the
overview, never another site."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pincer.gateway.ui.audit import _parse_time
from pincer.gateway.ui.auth import _next_of


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
    target = _next_of(value)
    assert target.startswith("/ui") and "//" not in target and ".." not in target and "\\" not in target
    assert target == "/ui/" or target == value
