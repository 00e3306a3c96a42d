"""``pincer people token --expires``: a duration or a date, anything else a clear UsageError."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.store.people import parse_expiry

NOW = 1_800_000_000.0


def test_durations_dates_and_never() -> None:
    assert parse_expiry("90m", now=NOW) == NOW + 5400
    assert parse_expiry("30d", now=NOW) == NOW + 30 * 86_400
    assert parse_expiry("2w", now=NOW) == NOW + 14 * 86_400
    assert parse_expiry("2027-01-31", now=NOW) == dt.datetime(2027, 1, 31, tzinfo=dt.UTC).timestamp()
    assert parse_expiry(None, now=NOW) is None and parse_expiry("never", now=NOW) is None
    for wrong in ("0d", "soon", "-3d", "3 days", "2027-13-01"):
        with pytest.raises(UsageError):
            parse_expiry(wrong, now=NOW)


@given(st.text(max_size=30))
def test_any_text_is_a_time_after_now_a_date_or_a_usage_error(text: str) -> None:
    try:
        found = parse_expiry(text, now=NOW)
    except UsageError as exc:
        assert exc.hint and "--expires" in exc.hint
    else:
        assert found is None or found > NOW or dt.date.fromisoformat(text.strip())
