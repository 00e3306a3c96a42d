"""The ``google_sheets`` built-in (Sheets API v4): a spreadsheet's sheets, read and write ranges,
append rows, create spreadsheets. A range is A1 notation (``Sheet1!A1:C10``); values are written
as a person would type them (``valueInputOption=USER_ENTERED``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim
from pincer.core.errors import UsageError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "sheets_tool", "DEFAULT_HOST"]

DEFAULT_HOST = "sheets.googleapis.com"
_API = "/v4/spreadsheets"
MAX_RANGE_CHARS = 500
_S = {"type": "string"}
_CELL = {"type": ["string", "number", "boolean", "null"]}

FIELDS: dict[str, dict[str, Any]] = {
    "spreadsheet_id": {**_S, "description": "The id in the spreadsheet's URL (/spreadsheets/d/ID/edit)"},
    "range": {**_S, "description": "A1 notation, e.g. Sheet1!A1:C10"},
    "values": {"type": "array", "items": {"type": "array", "items": _CELL}, "description": "Rows of cells"},
    "title": _S,
}


def check_range(value: str) -> str:
    """An A1 range as one path segment (sheet names may hold spaces: encoded, never a '/')."""
    if not value or len(value) > MAX_RANGE_CHARS or any(c in value for c in "/?#") or ".." in value or any(
        ord(c) < 32 or ord(c) == 127 for c in value
    ):
        raise UsageError(f"range {value[:80]!r} is not an A1 range",
                         hint="pass e.g. Sheet1!A1:C10 (no '/', '?', '#' or control characters)")
    return quote(value, safe="!:$'")


def check_args(action: str, args: Mapping[str, Any]) -> None:
    if "spreadsheet_id" in args:
        segment(args["spreadsheet_id"], "spreadsheet_id")
    if "range" in args:
        check_range(str(args["range"]))


def _sheet(a: Mapping[str, Any]) -> str:
    return f"{_API}/{segment(a['spreadsheet_id'], 'spreadsheet_id')}"


async def get_spreadsheet(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", _sheet(a), query={"includeGridData": False}) or {}
    sheets = [{"sheet_id": (s.get("properties") or {}).get("sheetId"), "title": (s.get("properties") or {}).get("title")}
              for s in data.get("sheets") or () if isinstance(s, Mapping)]
    return {"spreadsheet_id": data.get("spreadsheetId"), "title": (data.get("properties") or {}).get("title"),
            "sheets": sheets}


async def read_range(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", f"{_sheet(a)}/values/{check_range(str(a['range']))}") or {}
    return trim({"range": data.get("range"), "values": data.get("values") or []})


async def write_range(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body = {"range": a["range"], "majorDimension": "ROWS", "values": a["values"]}
    data = await api.call("PUT", f"{_sheet(a)}/values/{check_range(str(a['range']))}",
                          query={"valueInputOption": "USER_ENTERED"}, json=body) or {}
    return {k: data.get(k) for k in ("updatedRange", "updatedRows", "updatedColumns", "updatedCells")}


async def append_rows(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body = {"majorDimension": "ROWS", "values": a["values"]}
    data = await api.call("POST", f"{_sheet(a)}/values/{check_range(str(a['range']))}:append",
                          query={"valueInputOption": "USER_ENTERED", "insertDataOption": "INSERT_ROWS"},
                          json=body) or {}
    updates = data.get("updates") or {}
    return {k: updates.get(k) for k in ("updatedRange", "updatedRows", "updatedCells")}


async def create_spreadsheet(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("POST", _API, json={"properties": {"title": a["title"]}}) or {}
    return {"spreadsheet_id": data.get("spreadsheetId"), "title": (data.get("properties") or {}).get("title")}


ACTIONS: tuple[Action, ...] = (
    Action(name="get_spreadsheet", toolset="read", handler=get_spreadsheet, required=("spreadsheet_id",),
           description="a spreadsheet's title and sheets"),
    Action(name="read_range", toolset="read", handler=read_range, required=("spreadsheet_id", "range"),
           description="the values of a range"),
    Action(name="write_range", toolset="write", handler=write_range, required=("spreadsheet_id", "range", "values"),
           writes=True, description="overwrite a range with rows of values"),
    Action(name="append_rows", toolset="write", handler=append_rows, required=("spreadsheet_id", "range", "values"),
           writes=True, description="append rows after the table in a range"),
    Action(name="create_spreadsheet", toolset="write", handler=create_spreadsheet, required=("title",), writes=True,
           description="create a spreadsheet"),
)

DESCRIPTION = "Google Sheets: read and write ranges (A1 notation), append rows, create spreadsheets. The login is pincer's."


def sheets_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
                actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
                pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="google_sheets", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
