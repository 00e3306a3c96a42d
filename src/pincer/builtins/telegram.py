"""The ``telegram`` built-in: Telegram's Bot API (``POST https://api.telegram.org/bot<token>/METHOD``
with a JSON body): ``sendMessage``, ``sendPhoto``, ``sendDocument``, ``getUpdates``,
``editMessageText``, ``deleteMessage``.

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

from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action, ActionSet, select_actions
from pincer.builtins.api import ApiClient, BaseUrl, ConnectionPool, json_body, rebase_capabilities
from pincer.builtins.tool import bundled_manifest, make_tool
from pincer.builtins.trim import trim
from pincer.core.capabilities import Capabilities
from pincer.core.errors import ApiRateLimited, ApiRefused, ToolError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ACTIONS", "FIELDS", "telegram_tool", "manifest", "DEFAULT_BASE_URL", "DEFAULT_HOST", "PLACEHOLDER"]

DEFAULT_HOST = "api.telegram.org"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
PLACEHOLDER = "{TELEGRAM_BOT_TOKEN}"  # the manifest's url_path placeholder
MAX_TEXT_CHARS = 4096  # Telegram's limit for a message text
MAX_CAPTION_CHARS = 1024
MAX_UPDATES = 100  # Telegram's maximum for getUpdates' limit

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
    "Work in Telegram as a bot (Bot API): send messages, photos and documents, read the updates sent to the "
    "bot, edit and delete its messages. The bot token is added by pincer."
)


def manifest() -> Capabilities:
    return bundled_manifest("telegram")


def telegram_tool(
    *,
    base_url: str | None = None,
    actions: list[str] | None = None,
    toolsets: list[str] | None = None,
    read_only: bool = False,
    pool: ConnectionPool | None = None,
) -> NativeTool:
    chosen = select_actions(ACTIONS, tool="telegram", names=actions, toolsets=toolsets, read_only=read_only)
    base = BaseUrl.parse(
        base_url or DEFAULT_BASE_URL, configured=base_url is not None, key="[builtins.telegram] base_url"
    )
    caps = manifest()
    if base.configured:
        caps = rebase_capabilities(caps, base, default_host=DEFAULT_HOST)

    def api(host: Any) -> ApiClient:
        return ApiClient(
            tool="telegram", base=base, host=host, headers={"Accept": "application/json"},
            auth_command="pincer auth setup telegram", pool=pool,
        )

    return make_tool(
        name="telegram",
        description=DESCRIPTION,
        actions=ActionSet(tool="telegram", actions=chosen, fields=FIELDS),
        capabilities=caps,
        api=api,
    )
