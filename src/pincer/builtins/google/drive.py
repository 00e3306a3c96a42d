"""The ``google_drive`` built-in (Drive API v3): list, search, read metadata, download, upload,
create folders and trash files. A download of a Google Docs/Sheets/Slides file is an export (plain
text, CSV, plain text); other files come as UTF-8 text when they are, else base64, at most
:data:`MAX_DOWNLOAD_BYTES`."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim_fields
from pincer.core.errors import UsageError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "drive_tool", "DEFAULT_HOST"]

DEFAULT_HOST = "www.googleapis.com"
_API = "/drive/v3"
_UPLOAD = "/upload/drive/v3/files"
DEFAULT_LIMIT = 25
MAX_LIMIT = 100
MAX_DOWNLOAD_BYTES = 1_000_000
MAX_UPLOAD_BYTES = 5_000_000
FOLDER = "application/vnd.google-apps.folder"
_FILE_FIELDS = "id,name,mimeType,size,modifiedTime,parents,webViewLink,trashed"
_EXPORTS = {
    "application/vnd.google-apps.document": "text/plain",
    "application/vnd.google-apps.spreadsheet": "text/csv",
    "application/vnd.google-apps.presentation": "text/plain",
}
_S = {"type": "string"}

FIELDS: dict[str, dict[str, Any]] = {
    "file_id": _S,
    "folder_id": {**_S, "description": "A folder's id (list its files; upload or create into it)"},
    "query": {**_S, "description": "Drive query syntax, e.g. \"name contains 'report' and trashed = false\""},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "page_token": _S,
    "order_by": {**_S, "description": "e.g. modifiedTime desc"},
    "name": {**_S, "description": "The new file's or folder's name"},
    "content": {**_S, "description": "The file's content as text"},
    "content_base64": {**_S, "description": "The file's content, base64 (binary files)"},
    "mime_type": {**_S, "description": "The uploaded content's type (default text/plain)"},
}


def check_args(action: str, args: Mapping[str, Any]) -> None:
    for name in ("file_id", "folder_id"):
        if name in args:
            segment(args[name], name)
    if action == "upload_file" and ("content" in args) == ("content_base64" in args):
        raise UsageError("upload_file takes exactly one of content and content_base64",
                         hint="pass text as content, or bytes as content_base64")
    if "folder_id" in args and "'" in str(args["folder_id"]):
        raise UsageError("folder_id must not contain quotes", hint="pass the folder's id")


def _file(item: Mapping[str, Any]) -> dict[str, Any]:
    return trim_fields({k: item.get(k) for k in ("id", "name", "mimeType", "size", "modifiedTime", "parents",
                                          "webViewLink", "trashed") if item.get(k) is not None})


async def _list(api: GoogleApi, a: Mapping[str, Any], q: str | None) -> Any:
    query = {"q": q, "pageSize": min(int(a.get("limit") or DEFAULT_LIMIT), MAX_LIMIT),
             "pageToken": a.get("page_token"), "orderBy": a.get("order_by"),
             "fields": f"nextPageToken,files({_FILE_FIELDS})"}
    data = await api.call("GET", f"{_API}/files", query=query) or {}
    files = [_file(f) for f in data.get("files") or () if isinstance(f, Mapping)]
    return {"files": files, "count": len(files), "next_page_token": data.get("nextPageToken")}


async def list_files(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    q = "trashed = false"
    if a.get("folder_id"):
        q = f"'{a['folder_id']}' in parents and trashed = false"
    return await _list(api, a, q)


async def search_files(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, a, str(a["query"]))


async def get_file(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    path = f"{_API}/files/{segment(a['file_id'], 'file_id')}"
    return _file(await api.call("GET", path, query={"fields": _FILE_FIELDS}) or {})


async def download_file(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    file_id = segment(a["file_id"], "file_id")
    meta = await api.call("GET", f"{_API}/files/{file_id}", query={"fields": "id,name,mimeType,size"}) or {}
    mime = str(meta.get("mimeType") or "")
    if mime in _EXPORTS:
        data = await api.call("GET", f"{_API}/files/{file_id}/export", query={"mimeType": _EXPORTS[mime]}, raw=True)
        exported: str | None = _EXPORTS[mime]
    elif mime.startswith("application/vnd.google-apps."):
        raise UsageError(f"a {mime} file cannot be downloaded", hint="download a document, spreadsheet or file instead")
    else:
        data = await api.call("GET", f"{_API}/files/{file_id}", query={"alt": "media"}, raw=True)
        exported = None
    body = bytes(data or b"")
    cut = len(body) > MAX_DOWNLOAD_BYTES
    body = body[:MAX_DOWNLOAD_BYTES]
    out: dict[str, Any] = {"id": meta.get("id"), "name": meta.get("name"), "mimeType": mime,
                           "exported_as": exported, "truncated": cut}
    try:
        out["content"] = body.decode("utf-8")
        out["encoding"] = "utf-8"
    except UnicodeDecodeError:
        out["content"] = base64.b64encode(body).decode("ascii")
        out["encoding"] = "base64"
    return out


def _related(metadata: Mapping[str, Any], content: bytes, mime: str) -> tuple[bytes, str]:
    """A multipart/related body (Drive's ``uploadType=multipart``): metadata, then the content."""
    boundary = "pincer-" + secrets.token_hex(12)
    parts = [
        f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
        json.dumps(metadata).encode(),
        f"\r\n--{boundary}\r\nContent-Type: {mime}\r\n\r\n".encode(),
        content,
        f"\r\n--{boundary}--\r\n".encode(),
    ]
    return b"".join(parts), f"multipart/related; boundary={boundary}"


async def upload_file(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    if a.get("content_base64") is not None:
        try:
            content = base64.b64decode(str(a["content_base64"]), validate=True)
        except (binascii.Error, ValueError):
            raise UsageError("content_base64 is not base64", hint="encode the bytes with base64") from None
    else:
        content = str(a.get("content") or "").encode("utf-8")
    if len(content) > MAX_UPLOAD_BYTES:
        raise UsageError(f"the content is over {MAX_UPLOAD_BYTES} bytes", hint="upload a smaller file")
    mime = str(a.get("mime_type") or "text/plain")
    if any(c in mime for c in "\r\n;") or "/" not in mime:
        raise UsageError(f"mime_type {mime[:80]!r} is not a media type", hint="pass e.g. text/plain or image/png")
    metadata: dict[str, Any] = {"name": a["name"], "mimeType": mime}
    if a.get("folder_id"):
        metadata["parents"] = [a["folder_id"]]
    body, content_type = _related(metadata, content, mime)
    data = await api.call("POST", _UPLOAD, query={"uploadType": "multipart", "fields": _FILE_FIELDS},
                          content=body, headers={"Content-Type": content_type})
    return _file(data or {})


async def create_folder(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body: dict[str, Any] = {"name": a["name"], "mimeType": FOLDER}
    if a.get("folder_id"):
        body["parents"] = [a["folder_id"]]
    return _file(await api.call("POST", f"{_API}/files", query={"fields": _FILE_FIELDS}, json=body) or {})


async def trash_file(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    path = f"{_API}/files/{segment(a['file_id'], 'file_id')}"
    return _file(await api.call("PATCH", path, query={"fields": _FILE_FIELDS}, json={"trashed": True}) or {})


_PAGE = ("limit", "page_token", "order_by")

ACTIONS: tuple[Action, ...] = (
    Action(name="list_files", toolset="files", handler=list_files, optional=("folder_id", *_PAGE),
           description="files (of a folder), not trashed"),
    Action(name="search_files", toolset="files", handler=search_files, required=("query",), optional=_PAGE,
           description="files matching a Drive query"),
    Action(name="get_file", toolset="files", handler=get_file, required=("file_id",), description="a file's metadata"),
    Action(name="download_file", toolset="files", handler=download_file, required=("file_id",),
           description="a file's content (Google Docs/Sheets/Slides exported as text/CSV)"),
    Action(name="upload_file", toolset="write", handler=upload_file, required=("name",),
           optional=("content", "content_base64", "mime_type", "folder_id"), writes=True,
           description="upload a new file (text as content, bytes as content_base64)"),
    Action(name="create_folder", toolset="write", handler=create_folder, required=("name",), optional=("folder_id",),
           writes=True, description="create a folder"),
    Action(name="trash_file", toolset="write", handler=trash_file, required=("file_id",), writes=True,
           description="move a file to the trash"),
)

DESCRIPTION = (
    "Google Drive: list, search, read, download and upload files, create folders, trash files. "
    "The Google login is added by pincer; the tool never sees it."
)


def drive_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
               actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
               pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="google_drive", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
