"""The built-in tools: ``echo``, ``time``, ``json``, ``http``, ``read_file``, ``write_file``,
``list_dir``.

Each enforces what its HostContext says and decides nothing: ``http`` reaches only the hosts of
the grant (``host.network_hosts``) through :mod:`pincer.safety.egress`; the file tools stay inside
``host.workspace`` (:mod:`pincer.runtimes.native.workspace`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json as jsonlib
import logging
import zoneinfo
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pincer.core.effects import EffectKind
from pincer.core.errors import EgressDenied, SecretError, ToolError, UsageError
from pincer.core.values import CallEffects, HostContext, HostSecrets
from pincer.runtimes.native import jsonpath, workspace
from pincer.runtimes.native.decorator import NativeTool, tool
from pincer.runtimes.native.runtime import NativeRuntime
from pincer.runtimes.native.skill_roots import SkillRootGuard

if TYPE_CHECKING:  # imported where a request is made: listing the tools needs no HTTP stack
    from pincer.safety import egress
    from pincer.safety.urls import CheckedUrl

__all__ = ["BUILTIN_TOOLS", "builtin_runtime", "MAX_JSON_DOCUMENT_BYTES", "MAX_WRITE_BYTES", "MAX_LIST_ENTRIES"]

logger = logging.getLogger(__name__)

MAX_JSON_DOCUMENT_BYTES = 10_000_000
MAX_WRITE_BYTES = 10_000_000
MAX_READ_BYTES = 10_000_000
MAX_LIST_ENTRIES = 1_000
_JSON_CONTENT_TYPE = "application/json"


# ------------------------------------------------------------------------------------- echo / time


@tool(inline=True, trusted_output=True)
async def echo(text: str) -> dict[str, str]:
    """Return the text it is given, unchanged. Useful to test a connection or the call chain.

    Args:
        text: Any text; it comes back as it was sent.
    """
    return {"text": text}


@tool(name="time", inline=True, trusted_output=True)
def current_time(timezone: str | None = None) -> dict[str, Any]:
    """The current date and time, in UTC or in an IANA time zone.

    Args:
        timezone: An IANA time zone name such as "Europe/Berlin" or "America/New_York"; UTC when omitted.
    """
    name = timezone or "UTC"
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(
            f"unknown time zone {name!r}",
            hint='use an IANA name such as "UTC", "Europe/Berlin" or "Asia/Tokyo"',
        ) from None
    now = dt.datetime.now(tz=zone)
    return {
        "iso": now.isoformat(),
        "unix": round(now.timestamp(), 6),
        "timezone": name,
        "utc_offset": now.strftime("%z"),
        "weekday": now.strftime("%A"),
    }


# ------------------------------------------------------------------------------------------- json


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@tool(name="json", trusted_output=True)
def json_query(document: str, path: str = "") -> dict[str, Any]:
    """Parse a JSON document and return the value at a path such as a.b[0].c.

    Args:
        document: The JSON text to parse.
        path: Where to look: keys separated by dots, list indexes in brackets (negative from the end),
            keys with dots quoted as ["a.b"]. Empty or "$" returns the whole document.
    """
    if len(document) > MAX_JSON_DOCUMENT_BYTES:
        raise UsageError(
            f"the document is {len(document)} characters; the limit is {MAX_JSON_DOCUMENT_BYTES}",
            hint="pass a smaller document",
        )
    steps = jsonpath.parse_path(path)
    try:
        data = jsonlib.loads(document, parse_constant=_refuse_constant)
    except jsonlib.JSONDecodeError as exc:
        raise UsageError(
            f"the document is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint="check quotes, commas and brackets around that position",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"the document is not valid JSON: {exc}", hint="use plain JSON values") from None
    value = jsonpath.query(data, steps)
    return {"path": jsonpath.format_path(steps), "value": value}


# ------------------------------------------------------------------------------------------- http


class CredentialSecrets(Protocol):
    """What the http tool needs of ``HostContext.secrets`` (a per-call ``SecretAccess``): ``find``
    returns an allowed secret's value or None when unset (SecretError when not allowed) and
    records it; ``record`` marks a derived value (``Basic <base64>``) for redaction too."""

    def find(self, name: str) -> str | None: ...

    def record(self, value: str) -> None: ...


_HTTP_READ = frozenset({EffectKind.NETWORK})
_HTTP_WRITE = frozenset({EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE})
# A GET reads; a POST, PUT, PATCH or DELETE writes to the outside world (grants, the taint rule
# and approvals see external_write); a method not named here counts as a write (fail closed).
HTTP_CALL_EFFECTS = CallEffects(
    arg="method",
    default="GET",
    casefold=True,
    table={
        **dict.fromkeys(("GET", "HEAD", "OPTIONS"), _HTTP_READ),
        **dict.fromkeys(("POST", "PUT", "PATCH", "DELETE"), _HTTP_WRITE),
    },
)


@tool(
    name="http",
    effects=_HTTP_WRITE,
    side_effecting=True,  # any method may be sent; GET-only use still gets idempotent replays
    annotations={"openWorldHint": True, "readOnlyMethods": ["GET", "HEAD", "OPTIONS"]},
    call_effects=HTTP_CALL_EFFECTS,
)
async def http_request(
    url: str,
    host: HostContext,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: str | None = None,
    json: Any = None,
) -> dict[str, Any]:
    """Make an HTTPS request to a host the grant allows and return status, headers and body.

    Redirects are not followed: a 3xx comes back with its Location. Credentials configured for the
    host are added by pincer; the tool never sees them. Private and loopback addresses are refused.

    Args:
        url: The https URL to request.
        method: The HTTP method (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ...).
        headers: Extra request headers.
        body: A text request body (sent as UTF-8).
        json: A JSON request body; sets Content-Type to application/json. Exclusive with body.
    """
    if body is not None and json is not None:
        raise UsageError("pass either body or json, not both", hint="use json for JSON bodies, body for text")
    policy, method, target = _checked_target(url, method, host)  # refuse before any secret is read
    out_headers = dict(headers or {})
    content: bytes | None = None
    if json is not None:
        try:
            content = jsonlib.dumps(json, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise UsageError(f"json body cannot be serialised: {exc}", hint="use plain JSON values") from None
        if not any(k.lower() == "content-type" for k in out_headers):
            out_headers["Content-Type"] = _JSON_CONTENT_TYPE
    elif body is not None:
        content = body.encode("utf-8")
    send_url, out_headers = _inject(method, target.url, out_headers, host)
    from pincer.safety import egress

    request = egress.HttpRequest(method=method, url=send_url, headers=tuple(out_headers.items()), body=content)
    response = await egress.send(request, policy=policy)
    return _response_value(response, target.url)


def _checked_target(url: str, method: str, host: HostContext) -> tuple[egress.EgressPolicy, str, CheckedUrl]:
    if not host.network_hosts:
        raise EgressDenied(
            f"http: no host is allowed for tool {host.tool!r} in this call (rule: default deny)",
            hint='add the host to a grant in config.toml, e.g. [[grants]] tool = "http" hosts = ["api.example.com"]',
        )
    from pincer.safety import egress

    policy = _policy(host)
    method = egress.check_method(method)
    return policy, method, policy.check(method, url)


async def _http_preflight(args: Mapping[str, Any], host: HostContext) -> None:
    """Refuse before anyone is asked what the egress rule refuses anyway: a malformed or non-https
    URL, a host outside the hosts the call would get, a name that resolves to a private or
    metadata address. (The request itself checks again at connect time: DNS can change.)"""
    url, method = args.get("url"), args.get("method", "GET")
    if not isinstance(url, str) or not isinstance(method, str):
        return  # the schema check has refused these already
    policy, _method, target = _checked_target(url, method, host)
    from pincer.safety import egress

    try:
        await egress.resolve_checked(target, policy)
    except ToolError:
        return  # a name that does not resolve now is the call's own failure, reported when it runs


http_request = http_request.with_preflight(_http_preflight)


def _policy(host: HostContext) -> egress.EgressPolicy:
    from pincer.safety import egress

    caps_http = getattr(host.capabilities, "http", None) if host.capabilities is not None else None
    max_request = getattr(caps_http, "max_request_bytes", None) or egress.DEFAULT_MAX_REQUEST_BYTES
    max_response = getattr(caps_http, "max_response_bytes", None) or egress.DEFAULT_MAX_RESPONSE_BYTES
    timeout_s = min(host.timeout_s, getattr(caps_http, "timeout_secs", None) or host.timeout_s)
    try:
        return egress.EgressPolicy.from_hosts(
            host.network_hosts or (),
            allow_private_network=host.allow_private_network,
            # Plain http only ever reaches loopback; whoever may reach loopback at all (an operator
            # setting) may do so without TLS, which local test servers and dev APIs rarely have.
            allow_plain_http_loopback=host.allow_private_network,
            max_request_bytes=max_request,
            # Reading more than the call may return would only be thrown away by the output limit.
            max_response_bytes=min(max_response, max(host.max_output_bytes, 1)),
            timeout_s=timeout_s,
        )
    except UsageError as exc:
        raise EgressDenied(f"http: the grant's host list is unusable: {exc.message}", hint=exc.hint) from None


def _inject(method: str, url: str, headers: dict[str, str], host: HostContext) -> tuple[str, dict[str, str]]:
    """Apply the credential mappings of ``host.capabilities.http`` to the request.

    Values come from ``host.secrets`` (which resolves only the names this call may use) and each
    value placed is recorded there, so the leak scanner redacts it from the output.
    """
    caps_http = getattr(host.capabilities, "http", None) if host.capabilities is not None else None
    credentials = tuple(getattr(caps_http, "credentials", ()) or ())
    if not credentials:
        return url, headers
    if host.secrets is None:
        raise SecretError(
            "credentials are configured for this request but the call has no access to secrets",
            hint="this is a host bug: the dispatcher must pass SecretAccess in HostContext.secrets",
        )
    from pincer.secrets.injection import inject_credentials

    find, record = _secret_functions(host.secrets)
    injected = inject_credentials(method, url, headers, credentials=credentials, resolve=find)
    for value in injected.injected:
        record(value)
    return injected.url, dict(injected.headers)


def _secret_functions(access: HostSecrets) -> tuple[Callable[[str], str | None], Callable[[str], None]]:
    find = getattr(access, "find", None)
    record = getattr(access, "record", None)
    if not callable(find) or not callable(record):
        raise SecretError(
            f"HostContext.secrets ({type(access).__name__}) cannot look up or record secrets",
            hint="the dispatcher must pass a pincer.secrets SecretAccess (find(name), record(value))",
        )
    return find, record


def _response_value(response: egress.HttpResponse, url: str) -> dict[str, Any]:
    headers: dict[str, str] = {}
    for name, field in response.headers:
        key = name.lower()
        headers[key] = f"{headers[key]}, {field}" if key in headers else field
    text, encoding = _decode_body(response.body, headers.get("content-type", ""), response.truncated)
    value: dict[str, Any] = {
        "status": response.status,
        "url": url,
        "headers": headers,
        "body": text,
        "encoding": encoding,
        "truncated": response.truncated,
    }
    if 300 <= response.status < 400 and "location" in headers:
        value["redirect_not_followed"] = headers["location"]
    return value


def _decode_body(body: bytes, content_type: str, truncated: bool) -> tuple[str, str]:
    """Text when the bytes decode (in the declared charset, else UTF-8); base64 otherwise."""
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        key, _, val = param.strip().partition("=")
        if key.lower() == "charset" and val:
            charset = val.strip('"').lower()
    # A cut at the size limit may split a multi-byte character: try dropping its first bytes.
    for cut in range(4 if truncated else 1):
        try:
            return body[: len(body) - cut].decode(charset), "utf-8" if charset == "utf-8" else charset
        except (UnicodeDecodeError, LookupError):
            continue
    return base64.b64encode(body).decode("ascii"), "base64"


# ------------------------------------------------------------------------------------------ files


@tool(effects=[EffectKind.READ_FILESYSTEM])
def read_file(path: str, host: HostContext, offset: int = 0, max_bytes: int | None = None) -> dict[str, Any]:
    """Read a file in the workspace. Text comes back as is; other bytes as base64.

    Args:
        path: The file, relative to the workspace (no '..', no absolute paths).
        offset: Byte offset to start reading at.
        max_bytes: At most this many bytes are read; by default as many as a result may hold.
    """
    if offset < 0:
        raise UsageError("offset must be 0 or more", hint="use 0 to read from the start")
    limit = host.max_output_bytes if max_bytes is None else max_bytes
    if not 0 < limit <= MAX_READ_BYTES:
        raise UsageError(
            f"max_bytes must be between 1 and {MAX_READ_BYTES}", hint="read large files in pieces with offset"
        )
    target, data, size = workspace.read_in_workspace(host, path, offset=offset, limit=limit)
    truncated = offset + len(data) < size
    text, encoding = _decode_body(data, "", truncated)
    return {
        "path": target.shown,
        "size": size,
        "offset": offset,
        "content": text,
        "encoding": encoding,
        "truncated": truncated,
    }


@tool(effects=[EffectKind.WRITE_FILESYSTEM], side_effecting=True)
def write_file(
    path: str,
    content: str,
    host: HostContext,
    encoding: Literal["utf-8", "base64"] = "utf-8",
    make_dirs: bool = True,
) -> dict[str, Any]:
    """Create or replace a file in the workspace, atomically (readers never see half a file).

    Args:
        path: The file, relative to the workspace (no '..', no absolute paths).
        content: The new content: text, or base64 when encoding is "base64".
        encoding: How content is written: "utf-8" text or "base64" for binary data.
        make_dirs: Create missing parent directories.
    """
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise UsageError("content is not valid base64", hint='send base64 text or use encoding "utf-8"') from None
    else:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                "content holds characters that are not valid Unicode text", hint='use encoding "base64" for binary data'
            ) from None
    if len(data) > MAX_WRITE_BYTES:
        raise UsageError(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}", hint="write smaller files")
    target = workspace.resolve_path(host.workspace, path, home=host.home)
    workspace.write_bytes_atomic(target, data, make_dirs=make_dirs)
    return {"path": target.shown, "bytes_written": len(data)}


@tool(effects=[EffectKind.READ_FILESYSTEM])
def list_dir(host: HostContext, path: str = ".") -> dict[str, Any]:
    """List a directory in the workspace: names, types (file, dir, symlink, other) and file sizes.

    Args:
        path: The directory, relative to the workspace; "." is the workspace itself.
    """
    target = workspace.resolve_path(host.workspace, path, home=host.home, allow_root=True)
    entries, truncated = workspace.list_entries(target, limit=MAX_LIST_ENTRIES)
    return {
        "path": target.shown,
        "entries": [{"name": e.name, "type": e.type, "size": e.size} for e in entries],
        "truncated": truncated,
    }


BUILTIN_TOOLS: tuple[NativeTool, ...] = (echo, current_time, json_query, http_request, read_file, write_file, list_dir)


def builtin_runtime(*, name: str = "builtin", skill_roots: SkillRootGuard | None = None) -> NativeRuntime:
    """A NativeRuntime holding every built-in tool. With ``skill_roots``, ``write_file`` into a
    skill root asks (whatever the grant) and is recorded (``skill_roots.py``)."""
    if skill_roots is None:
        return NativeRuntime(BUILTIN_TOOLS, name=name)
    guard = skill_roots
    plain = write_file.fn

    def guarded_write_file(**kwargs: Any) -> dict[str, Any]:
        result = plain(**kwargs)
        host: HostContext = kwargs["host"]
        written = workspace.resolve_path(host.workspace, kwargs["path"], home=host.home)
        guard.record(written.absolute, session=host.session, tool=host.tool)
        return dict(result)

    guarded = dataclasses.replace(write_file, fn=guarded_write_file).with_preflight(guard.preflight("write_file"))
    return NativeRuntime(tuple(guarded if t is write_file else t for t in BUILTIN_TOOLS), name=name)
