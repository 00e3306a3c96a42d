"""Schedules: cron in a named zone across DST changes, 6 fields, aliases, at, every; the parser
only ever raises ScheduleInvalid."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ScheduleInvalid
from pincer.schedule import (
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    Schedule,
    parse_at,
    parse_cron,
    parse_every,
    parse_interval,
    schedule_from,
)


def _utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


def _runs(schedule: Schedule, start: float, count: int) -> list[str]:
    out, t = [], start
    for _ in range(count):
        found = schedule.next_after(t)
        assert found is not None
        out.append(dt.datetime.fromtimestamp(found, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"))
        t = found
    return out


def test_a_daily_job_follows_the_zone_across_the_spring_change() -> None:
    # New York moves from EST (-5) to EDT (-4) on 2026-03-08: 09:00 local is 14:00, then 13:00 UTC.
    job = parse_cron("0 9 * * *", tz="America/New_York")
    assert _runs(job, _utc(2026, 3, 6, 20), 3) == ["2026-03-07 14:00:00", "2026-03-08 13:00:00", "2026-03-09 13:00:00"]


def test_a_time_in_the_spring_gap_runs_once_when_the_gap_ends() -> None:
    # Berlin jumps from 02:00 CET to 03:00 CEST on 2026-03-29: 02:30 never happens that night.
    job = parse_cron("30 2 * * *", tz="Europe/Berlin")
    runs = _runs(job, _utc(2026, 3, 27, 12), 4)
    assert runs == ["2026-03-28 01:30:00", "2026-03-29 01:00:00", "2026-03-30 00:30:00", "2026-03-31 00:30:00"]
    local = dt.datetime(2026, 3, 29, 1, 0, tzinfo=dt.UTC).astimezone(ZoneInfo("Europe/Berlin"))
    assert local.strftime("%H:%M %Z") == "03:00 CEST"


def test_every_quarter_hour_in_the_gap_collapses_into_one_run() -> None:
    job = parse_cron("*/15 * * * *", tz="Europe/Berlin")
    runs = _runs(job, _utc(2026, 3, 29, 0, 40), 4)
    # 01:45 CET, then 02:00-02:45 do not exist: one run at 03:00 CEST, then 03:15, 03:30.
    assert runs == ["2026-03-29 00:45:00", "2026-03-29 01:00:00", "2026-03-29 01:15:00", "2026-03-29 01:30:00"]


def test_a_fixed_time_in_the_autumn_fold_runs_once_an_hourly_job_twice() -> None:
    # Berlin goes back from 03:00 CEST to 02:00 CET on 2026-10-25: 02:30 happens twice.
    daily = parse_cron("30 2 * * *", tz="Europe/Berlin")
    assert _runs(daily, _utc(2026, 10, 24, 12), 2) == ["2026-10-25 00:30:00", "2026-10-26 01:30:00"]
    hourly = parse_cron("30 * * * *", tz="Europe/Berlin")
    assert _runs(hourly, _utc(2026, 10, 24, 23, 0), 4) == [
        "2026-10-24 23:30:00", "2026-10-25 00:30:00", "2026-10-25 01:30:00", "2026-10-25 02:30:00",
    ]  # fmt: skip


def test_six_fields_put_seconds_first_and_aliases_work() -> None:
    six = parse_cron("*/20 0 9 * * *", tz="UTC")
    assert _runs(six, _utc(2026, 1, 1), 3) == ["2026-01-01 09:00:00", "2026-01-01 09:00:20", "2026-01-01 09:00:40"]
    daily = parse_cron("@daily", tz="Asia/Tokyo")
    assert _runs(daily, _utc(2026, 1, 1), 2) == ["2026-01-01 15:00:00", "2026-01-02 15:00:00"]
    assert parse_cron("@HOURLY", tz="UTC").expr == "@hourly"


def test_at_and_every() -> None:
    once = parse_at("2027-01-01T09:00:00+02:00")
    assert once.next_after(_utc(2026, 1, 1)) == _utc(2027, 1, 1, 7) and once.next_after(_utc(2027, 1, 1, 8)) is None
    assert parse_at("2027-01-01 09:00").at == _utc(2027, 1, 1, 9)  # no zone: UTC, as in OpenClaw
    every = parse_every("1h30m", anchor=_utc(2026, 1, 1))
    assert every.next_after(_utc(2026, 1, 1, 2)) == _utc(2026, 1, 1, 3)
    assert parse_interval("90") == 90.0 and parse_interval("1500ms") == 1.5
    assert parse_interval("2d") == 172_800 and parse_interval("every 30m") == 1_800
    assert Schedule.from_dict(every.to_dict()) == every and Schedule.from_dict(once.to_dict()) == once


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"cron": "61 * * * *"}, "does not parse"),
        ({"cron": "* * *"}, "has 3 fields"),
        ({"cron": "0 0 30 2 *"}, "never matches"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"at": "next tuesday"}, "not an ISO 8601 time"),
        ({"every": "soon"}, "not an interval"),
        ({"every": "0.2s"}, "shorter than"),
        ({"every": "99999999999d"}, "longer than 3650 days"),
        ({"every": "9" * 500 + "s"}, "longer than 3650 days"),
        ({"at": "9999-12-31T23:30:00-05:00"}, "past the last time"),
        ({}, "needs a schedule"),
        ({"cron": "* * * * *", "every": "1m"}, "exactly one"),
    ],
)
def test_bad_schedules_say_what_is_wrong(kwargs: dict[str, str], says: str) -> None:
    with pytest.raises(ScheduleInvalid) as info:
        schedule_from(**kwargs)
    assert says in info.value.message and info.value.hint


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.sampled_from([None, "UTC", "Europe/Berlin", "x/y"]))
def test_arbitrary_cron_text_only_raises_schedule_invalid(text: str, tz: str | None) -> None:
    try:
        schedule = parse_cron(text, tz=tz)
    except ScheduleInvalid:
        return
    assert schedule.next_after(_utc(2026, 6, 1)) is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_intervals_and_times_only_raise_schedule_invalid(text: str) -> None:
    for parse in (parse_interval, parse_at):
        try:
            parse(text)
        except ScheduleInvalid:
            pass


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["0 * * * *", "*/7 * * * *", "30 2 * * *", "0 9 * * 1-5", "15 1,2,3 * * *", "@daily"]),
    st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"]),
    st.integers(min_value=int(_utc(2026, 1, 1)), max_value=int(_utc(2027, 12, 31))),
)
def test_next_runs_only_move_forward(expr: str, tz: str, start: int) -> None:
    schedule = parse_cron(expr, tz=tz)
    t = float(start)
    for _ in range(5):
        found = schedule.next_after(t)
        assert found is not None and found > t
        t = found


def test_an_every_second_expression_is_a_schedule_not_never() -> None:
    """Failed on main before this test: ``* * * * * *`` (6 fields, seconds first) was refused as
    "never matches a date": the walk started three hours back for DST folds, 10,800 steps of one
    second, past its 10,000-step bound. Far from a DST change the walk now starts a second back."""
    every = parse_cron("* * * * * *", tz="Europe/Berlin")
    assert _runs(every, _utc(2026, 1, 1), 3) == ["2026-01-01 00:00:01", "2026-01-01 00:00:02", "2026-01-01 00:00:03"]
    near_change = _utc(2026, 10, 25, 0, 59, 58)  # Berlin falls back at 01:00 UTC
    assert _runs(every, near_change, 3) == ["2026-10-25 00:59:59", "2026-10-25 01:00:00", "2026-10-25 01:00:01"]
    assert _runs(parse_cron("*/10 * * * * *", tz="UTC"), _utc(2026, 1, 1, 0, 0, 5), 2) == [
        "2026-01-01 00:00:10", "2026-01-01 00:00:20",
    ]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"]),
    st.integers(min_value=int(_utc(2026, 1, 1)), max_value=int(_utc(2027, 12, 31))),
)
def test_every_second_is_the_next_second_whatever_the_zone(tz: str, start: int) -> None:
    assert parse_cron("* * * * * *", tz=tz).next_after(start + 0.5) == start + 1


_UNITS = st.sampled_from(["ms", "s", "m", "h", "d", "w", "D", "H"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"\A[0-9]{1,20}(\.[0-9]{1,4})?\Z"), _UNITS), min_size=1, max_size=4))
def test_an_interval_is_bounded_or_refused(parts: list[tuple[str, str]]) -> None:
    text = "".join(number + unit for number, unit in parts)
    try:
        seconds = parse_interval(text)
    except ScheduleInvalid as exc:
        assert "shorter than" in exc.message or "longer than" in exc.message, exc.message
        return
    assert MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S
    schedule = parse_every(text, anchor=_utc(2026, 1, 1))
    found = schedule.next_after(_utc(2026, 6, 1))
    assert found is not None and dt.datetime.fromtimestamp(found, dt.UTC).year < 2040
    assert Schedule.from_dict(schedule.to_dict()) == schedule and schedule.describe().startswith("every ")


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        _JSONISH,
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["every", "at", "cron", "x"])},
            optional={"every_s": _JSONISH | st.floats(), "anchor": _JSONISH | st.floats(), "at": _JSONISH,
                      "expr": _JSONISH | st.sampled_from(["* * * * *", "* * * * * *"]), "tz": _JSONISH},
        ),
    )
)  # fmt: skip
def test_a_stored_schedule_reads_back_or_raises_schedule_invalid(data: object) -> None:
    """A row stored before a bound existed (or edited by hand) only ever raises ScheduleInvalid,
    and what does read back can say its next run as a date."""
    try:
        schedule = Schedule.from_dict(data)
    except ScheduleInvalid:
        return
    found = schedule.next_after(_utc(2026, 6, 1))
    if found is not None:
        dt.datetime.fromtimestamp(found, dt.UTC)
    schedule.describe()


def test_a_zone_name_too_long_for_a_file_is_an_unknown_zone() -> None:
    """Failed before: ZoneInfo looks the name up as a file, and a name longer than the file
    system allows raised OSError (File name too long) out of Schedule.from_dict (hypothesis
    found it in the property test above)."""
    with pytest.raises(ScheduleInvalid, match="unknown time zone"):
        Schedule.from_dict({"kind": "cron", "expr": "* * * * *", "tz": "x" * 300})
