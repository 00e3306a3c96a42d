"""The ``google_slides`` built-in (Slides API v1): read a presentation's slides and their text,
create presentations, add slides, replace text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "slides_tool", "DEFAULT_HOST"]

DEFAULT_HOST = "slides.googleapis.com"
_API = "/v1/presentations"
_S = {"type": "string"}
LAYOUTS = ["BLANK", "TITLE", "TITLE_AND_BODY", "TITLE_AND_TWO_COLUMNS", "TITLE_ONLY", "SECTION_HEADER",
           "ONE_COLUMN_TEXT", "MAIN_POINT", "BIG_NUMBER"]

FIELDS: dict[str, dict[str, Any]] = {
    "presentation_id": {**_S, "description": "The id in the presentation's URL (/presentation/d/ID/edit)"},
    "title": _S,
    "layout": {"type": "string", "enum": LAYOUTS, "description": "The new slide's layout (default TITLE_AND_BODY)"},
    "index": {"type": "integer", "minimum": 0, "description": "Where to insert the slide (default: at the end)"},
    "find": {**_S, "minLength": 1},
    "replace_with": _S,
    "match_case": {"type": "boolean"},
}


def check_args(action: str, args: Mapping[str, Any]) -> None:
    if "presentation_id" in args:
        segment(args["presentation_id"], "presentation_id")


def _shape_text(element: Mapping[str, Any]) -> str:
    runs = ((element.get("shape") or {}).get("text") or {}).get("textElements") or ()
    return "".join(str((r.get("textRun") or {}).get("content") or "") for r in runs if isinstance(r, Mapping))


def _deck(a: Mapping[str, Any]) -> str:
    return f"{_API}/{segment(a['presentation_id'], 'presentation_id')}"


async def read_presentation(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", _deck(a)) or {}
    slides = [{"slide_id": s.get("objectId"),
               "text": "".join(_shape_text(e) for e in s.get("pageElements") or () if isinstance(e, Mapping))}
              for s in data.get("slides") or () if isinstance(s, Mapping)]
    return trim({"presentation_id": data.get("presentationId"), "title": data.get("title"), "slides": slides,
                 "count": len(slides)})


async def create_presentation(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("POST", _API, json={"title": a["title"]}) or {}
    return {"presentation_id": data.get("presentationId"), "title": data.get("title")}


async def _batch(api: GoogleApi, a: Mapping[str, Any], request: dict[str, Any]) -> Any:
    data = await api.call("POST", f"{_deck(a)}:batchUpdate", json={"requests": [request]}) or {}
    return {"presentation_id": data.get("presentationId"), "replies": trim(data.get("replies"))}


async def create_slide(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    request: dict[str, Any] = {"slideLayoutReference": {"predefinedLayout": a.get("layout") or "TITLE_AND_BODY"}}
    if a.get("index") is not None:
        request["insertionIndex"] = int(a["index"])
    return await _batch(api, a, {"createSlide": request})


async def replace_text(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    request = {"replaceAllText": {"containsText": {"text": a["find"], "matchCase": bool(a.get("match_case", True))},
                                  "replaceText": a["replace_with"]}}
    return await _batch(api, a, request)


ACTIONS: tuple[Action, ...] = (
    Action(name="read_presentation", toolset="read", handler=read_presentation, required=("presentation_id",),
           description="a presentation's slides and their text"),
    Action(name="create_presentation", toolset="write", handler=create_presentation, required=("title",),
           writes=True, description="create a presentation"),
    Action(name="create_slide", toolset="write", handler=create_slide, required=("presentation_id",),
           optional=("layout", "index"), writes=True, description="add a slide"),
    Action(name="replace_text", toolset="write", handler=replace_text,
           required=("presentation_id", "find", "replace_with"), optional=("match_case",), writes=True,
           description="replace every occurrence of a text on every slide"),
)

DESCRIPTION = "Google Slides: read slides' text, create presentations, add slides, replace text. The login is pincer's."


def slides_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
                actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
                pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="google_slides", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
