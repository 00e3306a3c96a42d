"""The ``google_docs`` built-in (Docs API v1): read a document's text, create one, append text at
its end, replace text everywhere in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "docs_tool", "DEFAULT_HOST", "document_text"]

DEFAULT_HOST = "docs.googleapis.com"
_API = "/v1/documents"
_S = {"type": "string"}

FIELDS: dict[str, dict[str, Any]] = {
    "document_id": {**_S, "description": "The id in the document's URL (/document/d/ID/edit)"},
    "title": _S,
    "text": {**_S, "description": "Text to append"},
    "find": {**_S, "minLength": 1, "description": "Text to find (every occurrence)"},
    "replace_with": _S,
    "match_case": {"type": "boolean"},
}


def check_args(action: str, args: Mapping[str, Any]) -> None:
    if "document_id" in args:
        segment(args["document_id"], "document_id")


def document_text(content: Any) -> str:
    """The text of a Docs ``body.content`` (paragraphs and tables), in order."""
    out: list[str] = []
    for element in content or ():
        if not isinstance(element, Mapping):
            continue
        for run in (element.get("paragraph") or {}).get("elements") or ():
            text = (run.get("textRun") or {}).get("content") if isinstance(run, Mapping) else None
            if isinstance(text, str):
                out.append(text)
        for row in (element.get("table") or {}).get("tableRows") or ():
            for cell in row.get("tableCells") or () if isinstance(row, Mapping) else ():
                out.append(document_text(cell.get("content")) if isinstance(cell, Mapping) else "")
    return "".join(out)


def _doc(a: Mapping[str, Any]) -> str:
    return f"{_API}/{segment(a['document_id'], 'document_id')}"


async def read_document(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", _doc(a)) or {}
    return trim({"document_id": data.get("documentId"), "title": data.get("title"),
                 "text": document_text((data.get("body") or {}).get("content"))})


async def create_document(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("POST", _API, json={"title": a["title"]}) or {}
    return {"document_id": data.get("documentId"), "title": data.get("title")}


async def _batch(api: GoogleApi, a: Mapping[str, Any], request: dict[str, Any]) -> Any:
    data = await api.call("POST", f"{_doc(a)}:batchUpdate", json={"requests": [request]}) or {}
    return {"document_id": data.get("documentId"), "replies": trim(data.get("replies"))}


async def append_text(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    return await _batch(api, a, {"insertText": {"text": a["text"], "endOfSegmentLocation": {}}})


async def replace_text(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    request = {"replaceAllText": {"containsText": {"text": a["find"], "matchCase": bool(a.get("match_case", True))},
                                  "replaceText": a["replace_with"]}}
    return await _batch(api, a, request)


ACTIONS: tuple[Action, ...] = (
    Action(name="read_document", toolset="documents", handler=read_document, required=("document_id",),
           description="a document's title and text"),
    Action(name="create_document", toolset="write", handler=create_document, required=("title",), writes=True,
           description="create an empty document"),
    Action(name="append_text", toolset="write", handler=append_text, required=("document_id", "text"), writes=True,
           description="append text at the end of a document"),
    Action(name="replace_text", toolset="write", handler=replace_text,
           required=("document_id", "find", "replace_with"), optional=("match_case",), writes=True,
           description="replace every occurrence of a text"),
)

DESCRIPTION = "Google Docs: read a document's text, create documents, append text, replace text. The login is pincer's."


def docs_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
              actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
              pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="google_docs", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
