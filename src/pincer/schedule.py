"""When a job runs: cron expressions in a named time zone, one-shot times, fixed intervals.

Three kinds, OpenClaw's: ``cron`` (5 fields, or 6 with seconds first, or an ``@daily``-style
alias; croniter reads them), ``at`` (one ISO 8601 instant; without a zone it is UTC, as in
OpenClaw) and ``every`` (an interval from an anchor).

Cron fields are wall-clock times in the job's IANA zone, and a DST change makes some wall times
happen twice and others never. The rule here is Vixie cron's: a time that falls in the gap of a
spring-forward change runs once, at the instant the gap ends (02:30 on the night clocks jump
from 02:00 to 03:00 runs at 03:00); a time that happens twice runs once, the first time, unless
the expression's hour field is ``*`` (an hourly job runs every real hour, both of them). The
next run is found by walking wall times with croniter and mapping each to its instants, so the
rule holds for any expression croniter accepts.

Used by the triggers (jobs, ``cron.yaml`` imports) and by the config (a job's schedule is checked
when the config is read), so it sits on the config's floor, below both.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pincer.core.errors import ScheduleInvalid

__all__ = [
    "Schedule",
    "parse_cron",
    "parse_at",
    "parse_every",
    "parse_interval",
    "schedule_from",
    "host_zone",
    "MAX_CRON_STEPS",
    "MIN_INTERVAL_S",
    "MAX_INTERVAL_S",
]

# Wall times looked at for one next-run search; croniter jumps field by field, so even a
# yearly expression takes a handful, and an every-second one twice the widest DST change
# (2 h: 14,400). Past this the best found so far is the answer, none: never matching.
MAX_CRON_STEPS = 16_000
# How far before "now" the walk starts, in wall time: the widest DST shift there is (Lord Howe
# has 30 minutes, most zones an hour, a few historic ones two) plus room.
_WALK_BACK = dt.timedelta(hours=3)
_ALIASES = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MAX_INSTANT_S = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last second a datetime holds
_INTERVAL = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0, "w": 604_800.0, None: 1.0}
MIN_INTERVAL_S = 1.0
# Ten years: a longer interval is a typo (``99999999999d`` runs past the year 9999, where a
# date cannot be written down), and a job meant to run less often than that is an ``at``.
MAX_INTERVAL_S = 3_650 * 86_400.0
# Offsets looked at around an instant to tell how wide a DST change near it is (one per hour
# of ``_WALK_BACK`` either side): far from one the walk starts a second back, not three hours.
_NEAR_CHANGE_PROBES = (-3, -2, -1, 1, 2, 3)


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """A job's schedule. ``next_after(t)`` is the first run strictly after the instant ``t``
    (seconds since the epoch), or None when there is none (an ``at`` already past)."""

    kind: str  # cron | at | every
    expr: str | None = None
    tz: str = "UTC"
    at: float | None = None
    every_s: float | None = None
    anchor: float | None = None

    def next_after(self, t: float) -> float | None:
        if self.kind == "at":
            return self.at if self.at is not None and self.at > t else None
        if self.kind == "every":
            every = float(self.every_s or MIN_INTERVAL_S)
            anchor = self.anchor if self.anchor is not None else 0.0
            if t < anchor:
                return anchor
            steps = int((t - anchor) // every) + 1
            return anchor + steps * every
        return _cron_next(str(self.expr), self.tz, t)

    def describe(self) -> str:
        if self.kind == "at":
            return f"at {_iso(self.at or 0.0)}"
        if self.kind == "every":
            return f"every {_seconds_text(float(self.every_s or 0))}"
        return f"cron {self.expr} ({self.tz})"

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "at":
            return {"kind": "at", "at": _iso(self.at or 0.0)}
        if self.kind == "every":
            return {"kind": "every", "every_s": self.every_s, "anchor": self.anchor}
        return {"kind": "cron", "expr": self.expr, "tz": self.tz}

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        """The stored form back (as :meth:`to_dict` wrote it); validated again."""
        if not isinstance(data, dict):
            raise ScheduleInvalid(f"a stored schedule is not an object: {str(data)[:60]!r}")
        kind = data.get("kind")
        if kind == "at":
            return parse_at(str(data.get("at")))
        if kind == "every":
            every = data.get("every_s")
            anchor = data.get("anchor")
            if not isinstance(every, (int, float)) or isinstance(every, bool) or not MIN_INTERVAL_S <= every <= MAX_INTERVAL_S:
                raise ScheduleInvalid(
                    f"a stored interval of {every!r} s is not from {MIN_INTERVAL_S:g} s to {MAX_INTERVAL_S / 86_400:g} days"
                )
            if anchor is not None and not (isinstance(anchor, (int, float)) and abs(anchor) <= _MAX_INSTANT_S):
                raise ScheduleInvalid(f"a stored interval's anchor is not a time: {anchor!r}")
            return cls(kind="every", every_s=float(every), anchor=float(anchor) if isinstance(anchor, (int, float)) else None)
        return parse_cron(str(data.get("expr")), tz=str(data.get("tz") or "UTC"))


# -- parsing -----------------------------------------------------------------------------------


def parse_cron(expr: str, *, tz: str | None = None) -> Schedule:
    """A 5- or 6-field (seconds first) cron expression or an ``@daily``-style alias, in ``tz``
    (an IANA name; default: this machine's zone). Refused when it can never match."""
    from croniter import croniter

    text = " ".join(str(expr).split())
    zone_name = _check_zone(tz) if tz else host_zone()
    fields = text.split(" ")
    if text.lower() in _ALIASES:
        text = text.lower()
    elif len(fields) not in (5, 6):
        raise ScheduleInvalid(
            f"cron expression {expr!r} has {len(fields)} fields",
            hint='use 5 fields (minute hour day month weekday, e.g. "0 9 * * 1-5"), 6 with seconds first, or @daily',
        )
    if not croniter.is_valid(text, second_at_beginning=len(fields) == 6):
        raise ScheduleInvalid(
            f"cron expression {expr!r} does not parse",
            hint='each field is a number, a range a-b, a list a,b, a step */n or *; e.g. "*/15 9-17 * * 1-5"',
        )
    schedule = Schedule(kind="cron", expr=text, tz=zone_name)
    try:
        found = schedule.next_after(0.0)
    except ScheduleInvalid:
        found = None
    if found is None:
        raise ScheduleInvalid(f"cron expression {expr!r} never matches a date", hint="check the day and month fields")
    return schedule


def parse_at(text: str) -> Schedule:
    """An ISO 8601 instant (``2027-01-01T09:00:00Z``, ``2027-01-01 09:00+02:00``); no zone: UTC."""
    raw = str(text).strip()
    try:
        when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ScheduleInvalid(
            f"{text!r} is not an ISO 8601 time", hint='e.g. "2027-01-01T09:00:00Z" or "2027-01-01T09:00:00+02:00"'
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    try:
        at = when.timestamp()
        _iso(at)  # 9999-12-31T23:00-05:00 is past the year 9999 in UTC: not a time we can show
    except (OverflowError, ValueError, OSError):
        raise ScheduleInvalid(f"{text!r} is past the last time pincer can schedule", hint="use a time before 9999") from None
    return Schedule(kind="at", at=at)


def parse_interval(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1h30m``, ``2d``, ``500ms`` -> seconds."""
    raw = str(text).strip().lower()
    if raw.startswith("every "):
        raw = raw[6:].strip()
    total, position = 0.0, 0
    for match in _INTERVAL.finditer(raw):
        if raw[position : match.start()].strip():
            break
        total += float(match.group(1)) * _UNIT_S[(match.group(2) or "").lower() or None]
        position = match.end()
    if not raw or raw[position:].strip() or position == 0:
        raise ScheduleInvalid(f"{text!r} is not an interval", hint='e.g. "90s", "30m", "1h30m" or "2d"')
    if total < MIN_INTERVAL_S:
        raise ScheduleInvalid(f"interval {text!r} is shorter than {MIN_INTERVAL_S:g} s", hint="use 1s or more")
    if total > MAX_INTERVAL_S:
        raise ScheduleInvalid(
            f"interval {text[:40]!r} is longer than {MAX_INTERVAL_S / 86_400:g} days",
            hint="use a shorter interval, or --at for a job that runs once",
        )
    return total


def parse_every(text: str, *, anchor: float | None = None) -> Schedule:
    return Schedule(kind="every", every_s=parse_interval(text), anchor=anchor)


def schedule_from(
    *, cron: str | None = None, at: str | None = None, every: str | None = None, tz: str | None = None,
    anchor: float | None = None,
) -> Schedule:  # fmt: skip
    """Exactly one of ``cron``, ``at``, ``every``, as ``pincer cron add`` and ``[[jobs]]`` give them."""
    given = [name for name, value in (("cron", cron), ("at", at), ("every", every)) if value is not None]
    if len(given) != 1:
        raise ScheduleInvalid(
            "give exactly one of --cron, --at, --every" if given else "a job needs a schedule",
            hint='e.g. --cron "0 9 * * *" [--tz Europe/Berlin], --at 2027-01-01T09:00:00Z or --every 30m',
        )
    if cron is not None:
        return parse_cron(cron, tz=tz)
    if at is not None:
        return parse_at(at)
    return parse_every(str(every), anchor=anchor)


# -- time zones --------------------------------------------------------------------------------


def _check_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long to be a file
        raise ScheduleInvalid(
            f"unknown time zone {name!r}", hint="use an IANA name such as UTC, Europe/Berlin or America/New_York"
        ) from None
    return name


def host_zone() -> str:
    """This machine's IANA zone name (TZ, /etc/timezone, the /etc/localtime link), else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                ZoneInfo(name)
                return name
            except (ZoneInfoNotFoundError, ValueError, OSError):
                continue
    return "UTC"


# -- the next run of a cron expression ---------------------------------------------------------


def _cron_next(expr: str, tz: str, t: float) -> float | None:
    from croniter import CroniterBadDateError, croniter

    zone = ZoneInfo(tz)
    fields = expr.split(" ")
    six = len(fields) == 6
    hour_field = "*" if expr == "@hourly" else "0" if expr.startswith("@") else fields[2] if six else fields[1]
    every_hour = hour_field.startswith("*")
    wall_now = dt.datetime.fromtimestamp(t, zone).replace(tzinfo=None)
    # The walk starts back (and goes on past the best found) by the width of a DST change
    # within _WALK_BACK of t, so a wall time that comes round again after a fold is seen; far
    # from a change, by a second. Three hours either way was 21,600 steps of an every-second
    # expression, past MAX_CRON_STEPS: ``* * * * * *`` read as "never matches".
    reach = _change_width(t, zone) + dt.timedelta(seconds=1)
    walker = croniter(expr, wall_now - reach, second_at_beginning=six)
    best: float | None = None
    best_wall: dt.datetime | None = None
    for _ in range(MAX_CRON_STEPS):
        try:
            wall = walker.get_next(dt.datetime)
        except (CroniterBadDateError, OverflowError, ValueError):
            return best
        if best_wall is not None and wall > best_wall + reach:
            return best
        for instant in _instants(wall, zone, every_hour=every_hour):
            if instant > t and (best is None or instant < best):
                best, best_wall = instant, wall
    return best


def _change_width(t: float, zone: ZoneInfo) -> dt.timedelta:
    """How far ``zone``'s UTC offset moves within ``_WALK_BACK`` of ``t`` (either side): zero
    far from a DST change, the change's size near one."""
    try:
        here = dt.datetime.fromtimestamp(t, zone).utcoffset() or dt.timedelta(0)
        offsets = [dt.datetime.fromtimestamp(t + hours * 3_600, zone).utcoffset() or dt.timedelta(0)
                   for hours in _NEAR_CHANGE_PROBES]  # fmt: skip
    except (OverflowError, ValueError, OSError):
        return _WALK_BACK
    return min(_WALK_BACK, max((abs(offset - here) for offset in offsets), default=dt.timedelta(0)))


def _instants(wall: dt.datetime, zone: ZoneInfo, *, every_hour: bool) -> list[float]:
    """The real instants a wall time names in ``zone``: one, none (a gap: the gap's end), or two
    (a fold: the first, or both for an every-hour expression)."""
    first = wall.replace(tzinfo=zone, fold=0).timestamp()
    second = wall.replace(tzinfo=zone, fold=1).timestamp()
    if first == second:
        return [first]
    if dt.datetime.fromtimestamp(first, zone).replace(tzinfo=None) != wall:
        # In a gap, fold=0 reads the wall time with the offset from before the change (an
        # instant after the change) and fold=1 with the one after (an instant before it).
        return [_transition(min(first, second), max(first, second), zone)]
    return [min(first, second), max(first, second)] if every_hour else [min(first, second)]


def _transition(low: float, high: float, zone: ZoneInfo) -> float:
    """The instant in (low, high] at which ``zone``'s UTC offset changes (whole seconds)."""
    before = dt.datetime.fromtimestamp(low, zone).utcoffset()
    lo, hi = int(low), int(high) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if dt.datetime.fromtimestamp(mid, zone).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return float(hi)


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


def _seconds_text(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
