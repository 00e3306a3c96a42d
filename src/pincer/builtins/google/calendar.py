"""The ``google_calendar`` built-in (Calendar API v3): calendars, and list, read, create, update
and delete events. ``start``/``end`` take an RFC 3339 time (``2025-06-01T10:00:00+02:00``) or an
all-day date (``2025-06-01``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim_fields
from pincer.core.errors import UsageError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "calendar_tool", "DEFAULT_HOST"]

DEFAULT_HOST = "www.googleapis.com"
_API = "/calendar/v3"
DEFAULT_LIMIT = 25
MAX_LIMIT = 250
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_S = {"type": "string"}

FIELDS: dict[str, dict[str, Any]] = {
    "calendar_id": {**_S, "description": "Calendar id (default: primary)"},
    "event_id": _S,
    "time_min": {**_S, "description": "RFC 3339 lower bound of the events' end, e.g. 2025-06-01T00:00:00Z"},
    "time_max": {**_S, "description": "RFC 3339 upper bound of the events' start"},
    "query": {**_S, "description": "Free text to match in events"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "page_token": _S,
    "summary": {**_S, "description": "The event's title"},
    "description": _S,
    "location": _S,
    "start": {**_S, "description": "RFC 3339 time or YYYY-MM-DD (all day)"},
    "end": {**_S, "description": "RFC 3339 time or YYYY-MM-DD (all day, exclusive)"},
    "time_zone": {**_S, "description": "IANA time zone of start/end, e.g. Europe/Berlin"},
    "attendees": {"type": "array", "items": _S, "maxItems": 200, "description": "Attendees' email addresses"},
}


def check_args(action: str, args: Mapping[str, Any]) -> None:
    for name in ("calendar_id", "event_id"):
        if name in args:
            segment(args[name], name)


def _cal(a: Mapping[str, Any]) -> str:
    return f"{_API}/calendars/{segment(a.get('calendar_id') or 'primary', 'calendar_id')}"


def _when(value: str, time_zone: str | None) -> dict[str, Any]:
    if _DATE.match(value):
        return {"date": value}
    out: dict[str, Any] = {"dateTime": value}
    if time_zone:
        out["timeZone"] = time_zone
    return out


def _event_body(a: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {k: a[k] for k in ("summary", "description", "location") if a.get(k) is not None}
    for key in ("start", "end"):
        if a.get(key):
            body[key] = _when(str(a[key]), a.get("time_zone"))
    if a.get("attendees") is not None:
        body["attendees"] = [{"email": str(e)} for e in a["attendees"]]
    return body


def _event(item: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("id", "status", "summary", "description", "location", "start", "end", "htmlLink", "organizer",
            "attendees", "recurringEventId")
    return trim_fields({k: item.get(k) for k in keep if item.get(k) is not None})


async def list_calendars(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", f"{_API}/users/me/calendarList", query={"pageToken": a.get("page_token")}) or {}
    items = [{k: c.get(k) for k in ("id", "summary", "primary", "accessRole", "timeZone")} for c in data.get("items") or ()]
    return {"calendars": items, "count": len(items), "next_page_token": data.get("nextPageToken")}


async def list_events(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    query = {"timeMin": a.get("time_min"), "timeMax": a.get("time_max"), "q": a.get("query"),
             "maxResults": min(int(a.get("limit") or DEFAULT_LIMIT), MAX_LIMIT), "pageToken": a.get("page_token"),
             "singleEvents": True, "orderBy": "startTime"}
    data = await api.call("GET", f"{_cal(a)}/events", query=query) or {}
    events = [_event(e) for e in data.get("items") or () if isinstance(e, Mapping)]
    return {"events": events, "count": len(events), "next_page_token": data.get("nextPageToken"),
            "time_zone": data.get("timeZone")}


async def get_event(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    return _event(await api.call("GET", f"{_cal(a)}/events/{segment(a['event_id'], 'event_id')}") or {})


async def create_event(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    if bool(_DATE.match(str(a["start"]))) != bool(_DATE.match(str(a["end"]))):
        raise UsageError("start and end must both be dates (all day) or both be times",
                         hint="pass e.g. start 2025-06-01 and end 2025-06-02, or two RFC 3339 times")
    return _event(await api.call("POST", f"{_cal(a)}/events", json=_event_body(a)) or {})


async def update_event(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body = _event_body(a)
    if not body:
        raise UsageError("update_event changes nothing", hint="pass summary, description, location, start, end or attendees")
    path = f"{_cal(a)}/events/{segment(a['event_id'], 'event_id')}"
    return _event(await api.call("PATCH", path, json=body) or {})


async def delete_event(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    await api.call("DELETE", f"{_cal(a)}/events/{segment(a['event_id'], 'event_id')}")
    return {"deleted": True, "event_id": a["event_id"]}


_EVENT = ("summary", "description", "location", "start", "end", "time_zone", "attendees")

ACTIONS: tuple[Action, ...] = (
    Action(name="list_calendars", toolset="calendars", handler=list_calendars, optional=("page_token",),
           description="the calendars of the account"),
    Action(name="list_events", toolset="events", handler=list_events,
           optional=("calendar_id", "time_min", "time_max", "query", "limit", "page_token"),
           description="events in time order (recurring ones expanded)"),
    Action(name="get_event", toolset="events", handler=get_event, required=("event_id",), optional=("calendar_id",),
           description="one event"),
    Action(name="create_event", toolset="events", handler=create_event, required=("summary", "start", "end"),
           optional=("calendar_id", "description", "location", "time_zone", "attendees"), writes=True,
           description="create an event"),
    Action(name="update_event", toolset="events", handler=update_event, required=("event_id",),
           optional=("calendar_id", *_EVENT), writes=True, description="change the fields given of an event"),
    Action(name="delete_event", toolset="events", handler=delete_event, required=("event_id",),
           optional=("calendar_id",), writes=True, description="delete an event"),
)

DESCRIPTION = (
    "Google Calendar: list calendars; list, read, create, update and delete events. Times are RFC 3339 "
    "(2025-06-01T10:00:00Z) or YYYY-MM-DD for all-day events. The Google login is added by pincer."
)


def calendar_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
                  actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
                  pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="google_calendar", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
