"""The ``gmail`` built-in (Gmail API v1, ``users/me``): search and read messages, send, draft,
reply in a thread, labels, trash. Messages are built with :mod:`email` (RFC 5322), so a header
value with a line break is refused rather than smuggling a second header (``Bcc:``)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from email.message import EmailMessage
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import ConnectionPool, segment
from pincer.builtins.google.api import GoogleApi, google_tool
from pincer.builtins.trim import trim
from pincer.core.errors import UsageError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "gmail_tool", "DEFAULT_HOST"]

DEFAULT_HOST = "gmail.googleapis.com"
_ME = "/gmail/v1/users/me"
DEFAULT_LIMIT = 10
MAX_LIMIT = 25  # each found message is one more request (its headers)
MAX_HEADER_CHARS = 2_000
_LISTED = ("From", "To", "Subject", "Date")
_S = {"type": "string"}
_EMAILS = {"type": "array", "items": _S, "maxItems": 100, "description": "Email addresses"}

FIELDS: dict[str, dict[str, Any]] = {
    "query": {**_S, "description": "Gmail search syntax, e.g. 'is:unread from:alice after:2025/01/01'"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Messages (default 10)"},
    "page_token": {**_S, "description": "next_page_token of the previous answer"},
    "label_ids": {"type": "array", "items": _S, "description": "Only messages with all these labels"},
    "message_id": {**_S, "description": "A message id from search_messages"},
    "thread_id": {**_S, "description": "Reply within this thread (with in_reply_to)"},
    "to": _EMAILS,
    "cc": _EMAILS,
    "bcc": _EMAILS,
    "subject": _S,
    "body": {**_S, "description": "Plain-text body"},
    "in_reply_to": {**_S, "description": "The Message-ID header of the message replied to"},
    "add_label_ids": {"type": "array", "items": _S},
    "remove_label_ids": {"type": "array", "items": _S},
}


def check_args(action: str, args: Mapping[str, Any]) -> None:
    """Header values without line breaks; ids as single path segments."""
    for name in ("subject", "in_reply_to", "thread_id"):
        value = args.get(name)
        if isinstance(value, str) and ("\r" in value or "\n" in value or len(value) > MAX_HEADER_CHARS):
            raise UsageError(
                f"{name} must be one line of at most {MAX_HEADER_CHARS} characters (rule: no header injection)",
                hint=f"remove line breaks from {name}",
            )
    for name in ("to", "cc", "bcc"):
        for address in args.get(name) or ():
            if not isinstance(address, str) or any(c in address for c in "\r\n,;") or "@" not in address:
                raise UsageError(
                    f"{name}: {str(address)[:80]!r} is not one email address",
                    hint=f"pass {name} as a list with one address per item, e.g. [\"alice@example.com\"]",
                )
    if "message_id" in args:
        segment(args["message_id"], "message_id")


def _raw(a: Mapping[str, Any]) -> str:
    message = EmailMessage()
    message["To"] = ", ".join(a.get("to") or ())
    for header, key in (("Cc", "cc"), ("Bcc", "bcc")):
        if a.get(key):
            message[header] = ", ".join(a[key])
    message["Subject"] = str(a.get("subject") or "")
    if a.get("in_reply_to"):
        message["In-Reply-To"] = str(a["in_reply_to"])
        message["References"] = str(a["in_reply_to"])
    message.set_content(str(a.get("body") or ""))
    return base64.urlsafe_b64encode(message.as_bytes()).decode("ascii")


def _headers(payload: Mapping[str, Any]) -> dict[str, str]:
    wanted = {"from", "to", "cc", "subject", "date", "message-id"}
    return {str(h.get("name")): str(h.get("value")) for h in payload.get("headers") or ()
            if isinstance(h, Mapping) and str(h.get("name", "")).lower() in wanted}


def _text(payload: Mapping[str, Any]) -> str:
    """The text/plain parts of a message, decoded (base64url), in order."""
    out = []
    if payload.get("mimeType") == "text/plain":
        data = (payload.get("body") or {}).get("data")
        if isinstance(data, str):
            try:
                out.append(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("utf-8", "replace"))
            except (binascii.Error, ValueError):
                pass
    for part in payload.get("parts") or ():
        if isinstance(part, Mapping):
            out.append(_text(part))
    return "".join(out)


async def search_messages(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    query = {"q": a.get("query"), "maxResults": min(int(a.get("limit") or DEFAULT_LIMIT), MAX_LIMIT),
             "pageToken": a.get("page_token")}
    if a.get("label_ids"):
        query["labelIds"] = list(a["label_ids"])
    data = await api.call("GET", f"{_ME}/messages", query=query) or {}
    found = []
    for item in data.get("messages") or ():
        mid = segment(item.get("id"), "message_id")
        meta = await api.call("GET", f"{_ME}/messages/{mid}",
                              query={"format": "metadata", "metadataHeaders": list(_LISTED)}) or {}
        found.append({"id": meta.get("id"), "thread_id": meta.get("threadId"), "snippet": meta.get("snippet"),
                      "label_ids": meta.get("labelIds"), "headers": _headers(meta.get("payload") or {})})
    return trim({"messages": found, "count": len(found), "next_page_token": data.get("nextPageToken"),
                 "result_size_estimate": data.get("resultSizeEstimate")})


async def get_message(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", f"{_ME}/messages/{segment(a['message_id'], 'message_id')}",
                          query={"format": "full"}) or {}
    payload = data.get("payload") or {}
    return trim({"id": data.get("id"), "thread_id": data.get("threadId"), "label_ids": data.get("labelIds"),
                 "snippet": data.get("snippet"), "headers": _headers(payload), "body": _text(payload)})


async def send_message(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body: dict[str, Any] = {"raw": _raw(a)}
    if a.get("thread_id"):
        body["threadId"] = a["thread_id"]
    data = await api.call("POST", f"{_ME}/messages/send", json=body) or {}
    return {"sent": True, "id": data.get("id"), "thread_id": data.get("threadId"), "label_ids": data.get("labelIds")}


async def create_draft(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    message: dict[str, Any] = {"raw": _raw(a)}
    if a.get("thread_id"):
        message["threadId"] = a["thread_id"]
    data = await api.call("POST", f"{_ME}/drafts", json={"message": message}) or {}
    return {"draft_id": data.get("id"), "message_id": (data.get("message") or {}).get("id")}


async def list_labels(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("GET", f"{_ME}/labels") or {}
    labels = [{k: item.get(k) for k in ("id", "name", "type")} for item in data.get("labels") or ()]
    return {"labels": labels, "count": len(labels)}


async def modify_labels(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    body = {"addLabelIds": list(a.get("add_label_ids") or ()), "removeLabelIds": list(a.get("remove_label_ids") or ())}
    data = await api.call("POST", f"{_ME}/messages/{segment(a['message_id'], 'message_id')}/modify", json=body) or {}
    return {"id": data.get("id"), "label_ids": data.get("labelIds")}


async def trash_message(api: GoogleApi, a: Mapping[str, Any]) -> Any:
    data = await api.call("POST", f"{_ME}/messages/{segment(a['message_id'], 'message_id')}/trash") or {}
    return {"trashed": True, "id": data.get("id")}


_MAIL = ("to", "subject", "body")
_MAIL_OPT = ("cc", "bcc", "thread_id", "in_reply_to")

ACTIONS: tuple[Action, ...] = (
    Action(name="search_messages", toolset="messages", handler=search_messages,
           optional=("query", "limit", "page_token", "label_ids"),
           description="search messages (Gmail syntax); answers ids, senders, subjects, snippets"),
    Action(name="get_message", toolset="messages", handler=get_message, required=("message_id",),
           description="one message's headers and plain-text body"),
    Action(name="send_message", toolset="send", handler=send_message, required=_MAIL, optional=_MAIL_OPT,
           writes=True, description="send an email (a reply: thread_id + in_reply_to)"),
    Action(name="create_draft", toolset="send", handler=create_draft, required=_MAIL, optional=_MAIL_OPT,
           writes=True, description="save an email as a draft"),
    Action(name="list_labels", toolset="labels", handler=list_labels, description="the mailbox's labels"),
    Action(name="modify_labels", toolset="labels", handler=modify_labels, required=("message_id",),
           optional=("add_label_ids", "remove_label_ids"), writes=True,
           description="add or remove labels on a message (e.g. remove UNREAD)"),
    Action(name="trash_message", toolset="messages", handler=trash_message, required=("message_id",),
           writes=True, description="move a message to the trash"),
)

DESCRIPTION = (
    "Gmail: search and read messages, send email or save drafts, reply in a thread, labels, trash. "
    "The Google login is added by pincer; the tool never sees it."
)


def gmail_tool(*, base_url: str | None = None, shared_base_url: str | None = None,
               actions: list[str] | None = None, toolsets: list[str] | None = None, read_only: bool = False,
               pool: ConnectionPool | None = None, tokens: Any = None) -> NativeTool:
    return google_tool(name="gmail", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS,
                       default_host=DEFAULT_HOST, base_url=base_url, shared_base_url=shared_base_url,
                       names=actions, toolsets=toolsets, read_only=read_only, pool=pool, tokens=tokens,
                       check=check_args)
