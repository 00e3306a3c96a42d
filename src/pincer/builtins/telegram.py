"""The ``telegram`` built-in: Telegram's Bot API (``POST https://api.telegram.org/bot<token>/METHOD``
with a JSON body): ``sendMessage``, ``sendPhoto``, ``sendDocument``, ``getUpdates``,
``editMessageText``, ``deleteMessage``.

``send_photo_file`` and ``send_document_file`` upload a file of the call's workspace (read under
the file tools' rules: no absolute path, no ``..``, no symlink out of the workspace) as
``multipart/form-data``, the way the Bot API takes a new file; they are actions of their own so
that reading the workspace (``read_filesystem``) is an effect a grant decides apart from sending
by URL or file_id.

The bot token (secret ``telegram_bot_token``) sits in the URL path. The tool's code only ever
builds ``/bot{TELEGRAM_BOT_TOKEN}/METHOD``: the egress client puts the token in place of the
placeholder just before the request leaves, every URL pincer names in an error is the
placeholder one (:meth:`pincer.builtins.api.ApiClient.request` scrubs the injected value from
any error the network layer raises), and the leak scanner redacts it from outputs, errors and
the audit like every injected value.

IronClaw's other Telegram tool (``telegram_mtproto``) acts as a person's own account over
MTProto: it needs Telegram's MTProto servers, an MTProto client and a logged-in account session,
far more authority than a bot that only sees what is sent to it. pincer does not offer it.
"""

from __future__ import annotations

import json
import mimetypes
import re
import secrets
from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import WRITE_EFFECTS, Action
from pincer.builtins.api import ApiClient, json_body
from pincer.builtins.api_tool import ApiTool
from pincer.builtins.tool import bundled_manifest
from pincer.builtins.trim import trim
from pincer.builtins.workspace_files import read_workspace_file
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import ApiRateLimited, ApiRefused, ToolError

__all__ = ["ACTIONS", "FIELDS", "telegram_tool", "manifest", "DEFAULT_BASE_URL", "DEFAULT_HOST", "PLACEHOLDER"]

DEFAULT_HOST = "api.telegram.org"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
PLACEHOLDER = "{TELEGRAM_BOT_TOKEN}"  # the manifest's url_path placeholder
MAX_TEXT_CHARS = 4096  # Telegram's limit for a message text
MAX_CAPTION_CHARS = 1024
MAX_UPDATES = 100  # Telegram's maximum for getUpdates' limit
MAX_PHOTO_BYTES = 10 * 1024 * 1024  # the Bot API's limits for an uploaded photo and document
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
MAX_FILENAME_CHARS = 200

_CHAT = {"type": ["integer", "string"], "description": "Chat ID, or @channelusername"}
_PARSE = {"type": "string", "enum": ["MarkdownV2", "HTML", "Markdown"], "description": "Text formatting"}

FIELDS: dict[str, dict[str, Any]] = {
    "chat_id": _CHAT,
    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
    "parse_mode": _PARSE,
    "message_id": {"type": "integer", "description": "The message's id in its chat"},
    "reply_to_message_id": {"type": "integer", "description": "Reply to this message of the chat"},
    "message_thread_id": {"type": "integer", "description": "Forum topic to post in"},
    "disable_notification": {"type": "boolean"},
    "photo": {"type": "string", "minLength": 1, "description": "Photo as an https URL or a file_id"},
    "document": {"type": "string", "minLength": 1, "description": "File as an https URL or a file_id"},
    "path": {"type": "string", "minLength": 1,
             "description": "A file in the workspace to upload, relative to it (e.g. out/chart.png)"},
    "caption": {"type": "string", "maxLength": MAX_CAPTION_CHARS},
    "offset": {"type": "integer", "description": "First update id to return (confirms earlier ones)"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_UPDATES, "description": "Updates to return (default 100)"},
    "allowed_updates": {"type": "array", "items": {"type": "string"}, "description": "Update types, e.g. message"},
}


def _obj(value: Any) -> Mapping[str, Any]:
    """``value`` when the API sent an object there, else an empty one."""
    return value if isinstance(value, Mapping) else {}

def _check(method: str, response: Any) -> Any:
    """The ``result`` of Telegram's answer; ``ok: false`` raised with Telegram's own description."""
    data = json_body(response, "telegram")
    if not isinstance(data, Mapping):
        raise ToolError(f"telegram: {method} answered HTTP {response.status} without a Bot API body", hint="retry later")
    if data.get("ok") is True and response.status == 200:
        return data.get("result")
    description = str(data.get("description") or f"HTTP {response.status}")[:300]
    code = data.get("error_code", response.status)
    params = _obj(data.get("parameters"))
    if code == 429 or response.status == 429:
        retry = params.get("retry_after")
        raise ApiRateLimited(
            f"telegram: {method} is rate-limited" + (f"; retry after {retry} s" if retry is not None else ""),
            hint="wait and retry; lower the call rate with [limits] in config.toml",
        )
    hint = (
        "set a valid bot token with `pincer auth setup telegram`"
        if code == 401
        else "check the chat_id and message_id (the bot must be a member of the chat)"
    )
    raise ApiRefused(f"telegram: {method} failed: {description}", api_code=str(code), hint=hint)


async def _call(api: ApiClient, method: str, body: Mapping[str, Any]) -> Any:
    payload = {k: v for k, v in body.items() if v is not None}
    return _check(method, await api.request("POST", f"/bot{PLACEHOLDER}/{method}", json=payload))


def _message(m: Any) -> Any:
    if not isinstance(m, Mapping):
        return m
    chat = _obj(m.get("chat"))
    sender = _obj(m.get("from"))
    out = {
        "message_id": m.get("message_id"),
        "date": m.get("date"),
        "chat": {k: chat[k] for k in ("id", "type", "title", "username") if k in chat},
        "from": sender.get("username") or sender.get("first_name"),
        "text": m.get("text"),
        "caption": m.get("caption"),
    }
    if isinstance(m.get("photo"), list):
        out["photo"] = [p.get("file_id") for p in m["photo"] if isinstance(p, Mapping)][-1:]
    if isinstance(m.get("document"), Mapping):
        out["document"] = {k: m["document"].get(k) for k in ("file_id", "file_name", "mime_type")}
    return trim({k: v for k, v in out.items() if v not in (None, {}, [])})


def _reply(args: Mapping[str, Any]) -> dict[str, Any] | None:
    target = args.get("reply_to_message_id")
    return {"message_id": target} if target is not None else None


async def send_message(api: ApiClient, args: Mapping[str, Any]) -> Any:
    body = {k: args.get(k) for k in ("chat_id", "text", "parse_mode", "message_thread_id", "disable_notification")}
    return _message(await _call(api, "sendMessage", {**body, "reply_parameters": _reply(args)}))


async def send_photo(api: ApiClient, args: Mapping[str, Any]) -> Any:
    body = {k: args.get(k) for k in ("chat_id", "photo", "caption", "parse_mode", "message_thread_id",
                                     "disable_notification")}
    return _message(await _call(api, "sendPhoto", {**body, "reply_parameters": _reply(args)}))


async def send_document(api: ApiClient, args: Mapping[str, Any]) -> Any:
    body = {k: args.get(k) for k in ("chat_id", "document", "caption", "parse_mode", "message_thread_id",
                                     "disable_notification")}
    return _message(await _call(api, "sendDocument", {**body, "reply_parameters": _reply(args)}))


def _form_value(value: Any) -> str:
    """A Bot API parameter as a multipart field: strings as they are, everything else as JSON
    (numbers, ``true``/``false``, and objects such as ``reply_parameters``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=False)


def _quoted(name: str) -> str:
    """A filename safe inside ``filename="..."``: no quote, backslash or line break can end the
    header or start another one."""
    return re.sub(r'["\\\x00-\x1f\x7f]', "_", name)[:MAX_FILENAME_CHARS] or "file"


def multipart_body(fields: Mapping[str, Any], *, file_field: str, filename: str, data: bytes) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body (RFC 7578): ``fields`` (None left out), then the file under
    ``file_field``; the body and its Content-Type."""
    boundary = "pincer-" + secrets.token_hex(16)
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is not None:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
            parts.append(_form_value(value).encode("utf-8") + b"\r\n")
    mime = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{_quoted(filename)}"\r\n'
        f"Content-Type: {mime}\r\n\r\n".encode()
    )
    parts += [data, f"\r\n--{boundary}--\r\n".encode()]
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


async def _upload(api: ApiClient, method: str, field: str, args: Mapping[str, Any], *, limit: int) -> Any:
    filename, data = await read_workspace_file(
        api.host, args["path"], tool=api.tool, limit=limit, refusal=f"the Bot API's {limit // (1024 * 1024)} MB limit for a {field}",
        hint="send a smaller file, or an https URL of it with send_photo or send_document",
    )
    fields = {k: args.get(k) for k in ("chat_id", "caption", "parse_mode", "message_thread_id", "disable_notification")}
    body, content_type = multipart_body(
        {**fields, "reply_parameters": _reply(args)}, file_field=field, filename=filename, data=data
    )
    response = await api.request(
        "POST", f"/bot{PLACEHOLDER}/{method}", content=body, headers={"Content-Type": content_type}
    )
    return _message(_check(method, response))


async def send_photo_file(api: ApiClient, args: Mapping[str, Any]) -> Any:
    return await _upload(api, "sendPhoto", "photo", args, limit=MAX_PHOTO_BYTES)


async def send_document_file(api: ApiClient, args: Mapping[str, Any]) -> Any:
    return await _upload(api, "sendDocument", "document", args, limit=MAX_DOCUMENT_BYTES)


async def get_updates(api: ApiClient, args: Mapping[str, Any]) -> Any:
    # timeout 0: a short poll. Long polling would hold a call open for as long as Telegram waits.
    body = {"offset": args.get("offset"), "limit": args.get("limit") or MAX_UPDATES, "timeout": 0,
            "allowed_updates": args.get("allowed_updates")}
    updates = await _call(api, "getUpdates", body)
    out = []
    for u in updates if isinstance(updates, list) else []:
        if not isinstance(u, Mapping):
            continue
        kind = next((k for k in u if k != "update_id"), None)
        item: dict[str, Any] = {"update_id": u.get("update_id"), "type": kind}
        if kind and isinstance(u.get(kind), Mapping) and "message_id" in u[kind]:
            item["message"] = _message(u[kind])
        out.append(item)
    next_offset = max((u["update_id"] for u in out if isinstance(u.get("update_id"), int)), default=None)
    return {"updates": out, "next_offset": next_offset + 1 if next_offset is not None else None}


async def edit_message_text(api: ApiClient, args: Mapping[str, Any]) -> Any:
    body = {k: args.get(k) for k in ("chat_id", "message_id", "text", "parse_mode")}
    return _message(await _call(api, "editMessageText", body))


async def delete_message(api: ApiClient, args: Mapping[str, Any]) -> Any:
    done = await _call(api, "deleteMessage", {"chat_id": args["chat_id"], "message_id": args["message_id"]})
    return {"deleted": done is True, "chat_id": args["chat_id"], "message_id": args["message_id"]}


_UPLOAD_EFFECTS = WRITE_EFFECTS | {EffectKind.READ_FILESYSTEM}  # it reads the workspace, then sends
_SEND = ("parse_mode", "message_thread_id", "disable_notification", "reply_to_message_id")

ACTIONS: tuple[Action, ...] = (
    Action(name="send_message", toolset="messages", handler=send_message, writes=True,
           required=("chat_id", "text"), optional=_SEND, description="send a text message to a chat"),
    Action(name="send_photo", toolset="messages", handler=send_photo, writes=True,
           required=("chat_id", "photo"), optional=("caption", *_SEND),
           description="send a photo (an https URL or a file_id) with an optional caption"),
    Action(name="send_document", toolset="messages", handler=send_document, writes=True,
           required=("chat_id", "document"), optional=("caption", *_SEND),
           description="send a file (an https URL or a file_id) with an optional caption"),
    Action(name="send_photo_file", toolset="messages", handler=send_photo_file, writes=True,
           effects=_UPLOAD_EFFECTS, required=("chat_id", "path"), optional=("caption", *_SEND),
           description="upload a photo from the workspace (up to 10 MB) with an optional caption"),
    Action(name="send_document_file", toolset="messages", handler=send_document_file, writes=True,
           effects=_UPLOAD_EFFECTS, required=("chat_id", "path"), optional=("caption", *_SEND),
           description="upload a file from the workspace (up to 50 MB) with an optional caption"),
    Action(name="get_updates", toolset="updates", handler=get_updates,
           optional=("offset", "limit", "allowed_updates"),
           description="new messages and other updates sent to the bot (pass next_offset to confirm them)"),
    Action(name="edit_message_text", toolset="messages", handler=edit_message_text, writes=True,
           required=("chat_id", "message_id", "text"), optional=("parse_mode",),
           description="replace the text of a message the bot sent"),
    Action(name="delete_message", toolset="messages", handler=delete_message, writes=True,
           required=("chat_id", "message_id"), description="delete a message"),
)

DESCRIPTION = (
    "Work in Telegram as a bot (Bot API): send messages, photos and documents (by URL, file_id, or a "
    "workspace file), read the updates sent to the bot, edit and delete its messages. The bot token is "
    "added by pincer."
)


def manifest() -> Capabilities:
    return bundled_manifest("telegram")


TELEGRAM = ApiTool(
    name="telegram", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS, hosts=(DEFAULT_HOST,),
    base_url_key="[builtins.telegram] base_url",
)  # fmt: skip
telegram_tool = TELEGRAM.tool
