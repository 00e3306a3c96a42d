"""The ``slack`` built-in: Slack's Web API (``POST https://slack.com/api/METHOD``, form-encoded,
as Slack's own ``@slack/web-api`` client sends it) for posting, thread replies, channels, history,
threads, reactions, file uploads and user lookups.

Slack answers HTTP 200 with ``{"ok": false, "error": "channel_not_found"}`` when a call fails:
that is an :class:`~pincer.core.errors.ApiRefused` carrying Slack's error code, never a success.
A 429 is :class:`~pincer.core.errors.ApiRateLimited` naming Slack's ``Retry-After``.

The bot token (secret ``slack_bot_token``, set by ``pincer auth setup slack`` or Slack's OAuth v2
flow) is injected by the egress client as ``Authorization: Bearer``; this module never reads it.
An upload follows Slack's external-upload flow: ``files.getUploadURLExternal``, the bytes to the
``upload_url`` it answers (only ``files.slack.com``, or the configured base URL's origin), then
``files.completeUploadExternal``.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pincer.builtins.actions import WRITE_EFFECTS, Action
from pincer.builtins.api import ApiClient, BaseUrl, json_body
from pincer.builtins.api_tool import ApiTool
from pincer.builtins.tool import bundled_manifest
from pincer.builtins.trim import trim, trim_fields
from pincer.builtins.workspace_files import read_workspace_file
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import ApiRateLimited, ApiRefused, EgressDenied, ToolError

__all__ = ["ACTIONS", "FIELDS", "slack_tool", "manifest", "DEFAULT_BASE_URL", "DEFAULT_HOST"]

DEFAULT_HOST = "slack.com"
FILES_HOST = "files.slack.com"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
DEFAULT_LIMIT = 100  # Slack's recommended page size for conversations.*
MAX_LIMIT = 1000  # Slack's documented maximum for conversations.list/history
MAX_UPLOAD_CHARS = 1_000_000  # upload_file's text, sent as the model wrote it
# upload_workspace_file's limit: Slack takes up to 1 GB, but the file passes through pincer's memory
# and its leak scan, and the egress request limit (max_request_bytes in the manifest) matches this.
MAX_WORKSPACE_UPLOAD_BYTES = 50 * 1024 * 1024

_S = {"type": "string"}
_CHANNEL = {"type": "string", "minLength": 1, "description": "Channel ID (C..., G... or D...) or name for posting"}
_TS = {"type": "string", "pattern": r"^\d+\.\d+$", "description": "Message timestamp, e.g. 1712345678.000100"}

FIELDS: dict[str, dict[str, Any]] = {
    "channel": _CHANNEL,
    "text": {"type": "string", "minLength": 1, "maxLength": 40_000, "description": "Message text (mrkdwn)"},
    "thread_ts": {**_TS, "description": "Timestamp of the thread's parent message"},
    "timestamp": {**_TS, "description": "Timestamp of the message to react to"},
    "reply_broadcast": {"type": "boolean", "description": "Also post the reply to the channel"},
    "unfurl_links": {"type": "boolean"},
    "name": {"type": "string", "pattern": r"^:?[a-z0-9_+\-']+:?$", "description": "Emoji name, e.g. thumbsup"},
    "types": {
        "type": "array",
        "items": {"type": "string", "enum": ["public_channel", "private_channel", "mpim", "im"]},
        "description": "Conversation types (default public_channel)",
    },
    "exclude_archived": {"type": "boolean"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Items per page (default 100)"},
    "cursor": {**_S, "description": "next_cursor of the previous page"},
    "oldest": {**_TS, "description": "Only messages after this timestamp"},
    "latest": {**_TS, "description": "Only messages before this timestamp"},
    "user": {"type": "string", "pattern": r"^[UW][A-Z0-9]+$", "description": "User ID, e.g. U012AB3CD"},
    "filename": {"type": "string", "minLength": 1, "maxLength": 255},
    "content": {"type": "string", "maxLength": MAX_UPLOAD_CHARS, "description": "The file's text"},
    "path": {"type": "string", "minLength": 1,
             "description": "A file in the workspace to upload, relative to it (e.g. out/report.pdf)"},
    "title": _S,
    "initial_comment": _S,
}



def _obj(value: Any) -> Mapping[str, Any]:
    """``value`` when the API sent an object there, else an empty one."""
    return value if isinstance(value, Mapping) else {}

def _check(method: str, response: Any) -> dict[str, Any]:
    """Slack's answer to ``method`` as a mapping; its ``ok: false`` (and HTTP errors) raised."""
    if response.status == 429:
        retry = response.header("retry-after")
        raise ApiRateLimited(
            f"slack: {method} is rate-limited" + (f"; retry after {retry} s" if retry else ""),
            hint="wait and retry; lower the call rate with [limits] in config.toml",
        )
    data = json_body(response, "slack") if response.status == 200 else None
    if response.status != 200 or not isinstance(data, Mapping):
        raise ToolError(f"slack: {method} answered HTTP {response.status}", hint="retry later")
    if data.get("ok") is not True:
        code = str(data.get("error") or "unknown_error")[:100]
        raise ApiRefused(
            f"slack: {method} failed: {code}",
            api_code=code,
            hint=_HINTS.get(code, "see Slack's error list for the method at https://api.slack.com/methods"),
        )
    return dict(data)


_HINTS = {
    "not_authed": "set the bot token with `pincer auth setup slack`",
    "invalid_auth": "the bot token is not valid: set a new one with `pincer auth setup slack`",
    "token_revoked": "the bot token was revoked: set a new one with `pincer auth setup slack`",
    "missing_scope": "add the scope to the Slack app (api.slack.com/apps), reinstall it, then `pincer auth setup slack`",
    "not_in_channel": "invite the bot to the channel (/invite @bot) and retry",
    "channel_not_found": "pass a channel ID from the list_channels action",
}


async def _call(api: ApiClient, method: str, form: Mapping[str, Any]) -> dict[str, Any]:
    return _check(method, await api.request("POST", f"/api/{method}", form=form))


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    out = trim_fields({k: m[k] for k in ("ts", "user", "bot_id", "text", "thread_ts", "reply_count", "subtype") if k in m})
    reactions = m.get("reactions")
    if isinstance(reactions, list):
        out["reactions"] = [{"name": r.get("name"), "count": r.get("count")} for r in reactions if isinstance(r, Mapping)]
    files = m.get("files")
    if isinstance(files, list):
        out["files"] = [{"id": f.get("id"), "name": f.get("name")} for f in files if isinstance(f, Mapping)]
    return out


def _page(data: Mapping[str, Any]) -> str | None:
    meta = data.get("response_metadata")
    cursor = meta.get("next_cursor") if isinstance(meta, Mapping) else None
    return cursor or None


async def send_message(api: ApiClient, args: Mapping[str, Any]) -> Any:
    form = {"channel": args["channel"], "text": args["text"], "unfurl_links": args.get("unfurl_links")}
    data = await _call(api, "chat.postMessage", form)
    return {"channel": data.get("channel"), "ts": data.get("ts")}


async def reply_in_thread(api: ApiClient, args: Mapping[str, Any]) -> Any:
    form = {
        "channel": args["channel"],
        "text": args["text"],
        "thread_ts": args["thread_ts"],
        "reply_broadcast": args.get("reply_broadcast"),
    }
    data = await _call(api, "chat.postMessage", form)
    return {"channel": data.get("channel"), "ts": data.get("ts"), "thread_ts": args["thread_ts"]}


async def list_channels(api: ApiClient, args: Mapping[str, Any]) -> Any:
    form = {
        "types": ",".join(args.get("types") or ["public_channel"]),
        "exclude_archived": args.get("exclude_archived", True),
        "limit": args.get("limit") or DEFAULT_LIMIT,
        "cursor": args.get("cursor"),
    }
    data = await _call(api, "conversations.list", form)
    channels = []
    for c in data.get("channels") or []:
        if isinstance(c, Mapping):
            topic = c.get("topic")
            channels.append(
                trim(
                    {
                        "id": c.get("id"),
                        "name": c.get("name"),
                        "is_private": c.get("is_private"),
                        "is_archived": c.get("is_archived"),
                        "is_member": c.get("is_member"),
                        "num_members": c.get("num_members"),
                        "topic": topic.get("value") if isinstance(topic, Mapping) else None,
                    }
                )
            )
    return {"channels": channels, "next_cursor": _page(data)}


async def get_channel_history(api: ApiClient, args: Mapping[str, Any]) -> Any:
    form = {k: args.get(k) for k in ("channel", "cursor", "oldest", "latest")}
    form["limit"] = args.get("limit") or DEFAULT_LIMIT
    data = await _call(api, "conversations.history", form)
    messages = [_message(m) for m in data.get("messages") or [] if isinstance(m, Mapping)]
    return {"messages": messages, "has_more": bool(data.get("has_more")), "next_cursor": _page(data)}


async def get_thread_replies(api: ApiClient, args: Mapping[str, Any]) -> Any:
    form = {"channel": args["channel"], "ts": args["thread_ts"], "cursor": args.get("cursor")}
    form["limit"] = args.get("limit") or DEFAULT_LIMIT
    data = await _call(api, "conversations.replies", form)
    messages = [_message(m) for m in data.get("messages") or [] if isinstance(m, Mapping)]
    return {"messages": messages, "has_more": bool(data.get("has_more")), "next_cursor": _page(data)}


async def add_reaction(api: ApiClient, args: Mapping[str, Any]) -> Any:
    name = str(args["name"]).strip(":")
    await _call(api, "reactions.add", {"channel": args["channel"], "timestamp": args["timestamp"], "name": name})
    return {"channel": args["channel"], "timestamp": args["timestamp"], "name": name, "added": True}


async def get_user_info(api: ApiClient, args: Mapping[str, Any]) -> Any:
    data = await _call(api, "users.info", {"user": args["user"]})
    user = _obj(data.get("user"))
    profile = _obj(user.get("profile"))
    return trim(
        {
            "id": user.get("id"),
            "name": user.get("name"),
            "real_name": user.get("real_name") or profile.get("real_name"),
            "display_name": profile.get("display_name"),
            "title": profile.get("title"),
            "tz": user.get("tz"),
            "is_bot": user.get("is_bot"),
            "deleted": user.get("deleted"),
        }
    )


async def upload_file(api: ApiClient, args: Mapping[str, Any]) -> Any:
    return await _upload(api, str(args["filename"]), str(args["content"]).encode("utf-8"), args)


async def upload_workspace_file(api: ApiClient, args: Mapping[str, Any]) -> Any:
    name, data = await read_workspace_file(
        api.host, args["path"], tool=api.tool, limit=MAX_WORKSPACE_UPLOAD_BYTES,
        refusal=f"the {MAX_WORKSPACE_UPLOAD_BYTES // (1024 * 1024)} MB limit for a file sent through pincer",
        hint="share a link to the file instead (send_message), or upload it to Slack directly",
    )  # fmt: skip
    return await _upload(api, str(args.get("filename") or name), data, args)


async def _upload(api: ApiClient, filename: str, data: bytes, args: Mapping[str, Any]) -> Any:
    """Slack's external upload: a ticket, the bytes to the ticket's URL, then the share."""
    ticket = await _call(api, "files.getUploadURLExternal", {"filename": filename, "length": len(data)})
    upload_url, file_id = ticket.get("upload_url"), ticket.get("file_id")
    if not isinstance(upload_url, str) or not isinstance(file_id, str):
        raise ToolError("slack: files.getUploadURLExternal answered without upload_url or file_id", hint="retry later")
    # Slack's uploads host, or (a configured base URL) that same origin: nowhere an answer names.
    uploads = api if api.base.configured else _files_client(api)
    response = await uploads.request(
        "POST", _upload_path(uploads.base, upload_url), content=data, headers={"Content-Type": "application/octet-stream"}
    )
    if response.status != 200:
        raise ToolError(f"slack: the file upload answered HTTP {response.status}", hint="retry later")
    files = [{"id": file_id, "title": args.get("title") or filename}]
    form = {
        "files": jsonlib.dumps(files),
        "channel_id": args["channel"],
        "thread_ts": args.get("thread_ts"),
        "initial_comment": args.get("initial_comment"),
    }
    done = await _call(api, "files.completeUploadExternal", form)
    shared = [f.get("id") for f in done.get("files") or [] if isinstance(f, Mapping)]
    return {"file_id": file_id, "files": shared, "channel": args["channel"]}


_FILES_BASE = BaseUrl(scheme="https", host=FILES_HOST, port=443, path="")


def _files_client(api: ApiClient) -> ApiClient:
    return ApiClient(tool="slack", base=_FILES_BASE, host=api.host, auth_command="pincer auth setup slack")


def _upload_path(base: BaseUrl, url: str) -> str:
    """The path (and query) of Slack's ``upload_url``; refused unless it is on ``base``'s origin
    under ``/upload/``: an answer must not steer the file (and the token) anywhere else."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        parts, port = None, 0
    if (
        parts is None
        or parts.scheme != base.scheme
        or (parts.hostname or "").lower() != base.host
        or port != base.port
        or not parts.path.startswith(base.path + "/upload/")
        or any(seg in ("..", ".") or "%" in seg for seg in parts.path.split("/"))
    ):
        raise EgressDenied(
            f"slack: the upload URL Slack answered is not under {base.url('/upload/')} (rule: uploads stay on Slack)",
            hint="point [builtins.slack] base_url in config.toml at Slack's API origin",
        )
    return parts.path[len(base.path):] + (f"?{parts.query}" if parts.query else "")


def _a(name: str, toolset: str, handler: Any, description: str, required: tuple[str, ...], optional: tuple[str, ...] = (),
       *, writes: bool = False, effects: frozenset[EffectKind] | None = None) -> Action:
    return Action(name=name, toolset=toolset, handler=handler, description=description, required=required,
                  optional=optional, writes=writes, effects=effects)


_UPLOAD_EFFECTS = WRITE_EFFECTS | {EffectKind.READ_FILESYSTEM}  # it reads the workspace, then sends


ACTIONS: tuple[Action, ...] = (
    _a("send_message", "messages", send_message, "post a message to a channel", ("channel", "text"),
       ("unfurl_links",), writes=True),
    _a("reply_in_thread", "messages", reply_in_thread, "reply in a message's thread", ("channel", "thread_ts", "text"),
       ("reply_broadcast",), writes=True),
    _a("get_channel_history", "messages", get_channel_history, "a channel's recent messages, newest first",
       ("channel",), ("limit", "cursor", "oldest", "latest")),
    _a("get_thread_replies", "messages", get_thread_replies, "a thread's messages, parent first",
       ("channel", "thread_ts"), ("limit", "cursor")),
    _a("list_channels", "channels", list_channels, "the workspace's channels (id, name, topic)", (),
       ("types", "exclude_archived", "limit", "cursor")),
    _a("add_reaction", "reactions", add_reaction, "add an emoji reaction to a message",
       ("channel", "timestamp", "name"), writes=True),
    _a("upload_file", "files", upload_file, "upload a text file to a channel (or thread)",
       ("channel", "filename", "content"), ("title", "initial_comment", "thread_ts"), writes=True),
    _a("upload_workspace_file", "files", upload_workspace_file,
       "upload a file of the workspace (any type, up to 50 MB) to a channel (or thread)",
       ("channel", "path"), ("filename", "title", "initial_comment", "thread_ts"), writes=True,
       effects=_UPLOAD_EFFECTS),
    _a("get_user_info", "users", get_user_info, "a user's name, title and time zone", ("user",)),
)

DESCRIPTION = (
    "Work in Slack as the workspace's bot: post messages and thread replies, list channels, read channel "
    "history and threads, add reactions, upload files (text it writes, or a workspace file), look up users. The bot token is added by pincer."
)


def manifest() -> Capabilities:
    return bundled_manifest("slack")


SLACK = ApiTool(
    name="slack", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS, hosts=(DEFAULT_HOST, FILES_HOST),
    base_url_key="[builtins.slack] base_url",
)  # fmt: skip
slack_tool = SLACK.tool
