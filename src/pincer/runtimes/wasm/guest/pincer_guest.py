"""pincer_guest: write a pincer WASM tool (world ``near:agent/sandboxed-tool@0.3.0``) in Python.

This module runs *inside* the component (componentize-py puts it on the guest's path when you
run ``pincer wasm build``). A tool is one module::

    from pincer_guest import Tool, tool, http_request, log   # Tool must be importable from it

    @tool(description="Say hello", schema={"type": "object", "properties": {"name": {"type": "string"}}})
    def hello(params: dict) -> dict:
        log("info", "saying hello")
        return {"greeting": f"hello {params.get('name', 'world')}"}

Contract:
- exactly one function per module is decorated with ``@tool``; it receives the parsed JSON
  params (a dict) and returns any JSON-serialisable value;
- raising ``ToolFailed("message")`` returns that message as the tool's error; any other
  exception becomes ``"TypeName: message"``;
- the host functions below are thin wrappers over the ``host`` interface; ``http_request`` and
  ``invoke`` raise ``HostError`` with the host's (redacted) message when the host refuses.

The component runs with stubbed WASI: no clock, filesystem, sockets or entropy except what the
host interface offers (``now_millis``, ``workspace_read``, ``http_request``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from componentize_py_types import Err
from wit_world.exports import tool as _tool_types
from wit_world.imports import host as _host

__all__ = [
    "Tool",
    "tool",
    "ToolFailed",
    "HostError",
    "HttpResponse",
    "log",
    "now_millis",
    "workspace_read",
    "http_request",
    "invoke",
    "secret_exists",
]

_TOOL: dict[str, Any] = {}
_LEVELS = {
    "trace": _host.LogLevel.TRACE,
    "debug": _host.LogLevel.DEBUG,
    "info": _host.LogLevel.INFO,
    "warn": _host.LogLevel.WARN,
    "error": _host.LogLevel.ERROR,
}


class ToolFailed(Exception):
    """Raise from a tool to return a plain error message to the caller."""


class HostError(Exception):
    """The host refused or failed a request (allowlist, rate limit, size, network, policy)."""


class HttpResponse:
    """A response as the host returned it: ``status``, ``headers`` (dict) and ``body`` (bytes)."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


def tool(
    *, description: str, schema: dict[str, Any]
) -> Callable[[Callable[[dict[str, Any]], Any]], Callable[[dict[str, Any]], Any]]:
    """Register the module's tool function with its description and JSON Schema."""

    def register(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        if _TOOL:
            raise RuntimeError("pincer_guest: only one @tool function per component")
        _TOOL.update(fn=fn, description=description, schema=json.dumps(schema))
        return fn

    return register


class Tool:
    """The export componentize-py binds to the ``tool`` interface; dispatches to the @tool function."""

    def execute(self, req: _tool_types.Request) -> _tool_types.Response:
        if "fn" not in _TOOL:
            return _tool_types.Response(output=None, error="no @tool function was registered")
        try:
            params = json.loads(req.params) if req.params else {}
            result = _TOOL["fn"](params)
            return _tool_types.Response(output=json.dumps(result), error=None)
        except ToolFailed as exc:
            return _tool_types.Response(output=None, error=str(exc))
        except Exception as exc:  # the tool's own bug: report it as its error, not a trap  # noqa: BLE001
            return _tool_types.Response(output=None, error=f"{type(exc).__name__}: {exc}")

    def schema(self) -> str:
        schema: str = _TOOL.get("schema", '{"type": "object"}')  # @tool stores it JSON-encoded
        return schema

    def description(self) -> str:
        description: str = _TOOL.get("description", "")
        return description


def log(level: str, message: str) -> None:
    """Emit a log line; the host keeps at most 1,000 per execution, 4 KB each."""
    _host.log(_LEVELS.get(level, _host.LogLevel.INFO), message)


# The bindings (wit_world) are generated at build time, so the type checker does not see them:
# each result is declared as the type its WIT signature gives (u64, option<string>, bool).
def now_millis() -> int:
    millis: int = _host.now_millis()
    return millis


def workspace_read(path: str) -> str | None:
    """A file under an allowed workspace prefix, or None (missing, refused or not granted)."""
    content: str | None = _host.workspace_read(path)
    return content


def secret_exists(name: str) -> bool:
    """True only for a secret this tool may use and that exists; its value is never visible."""
    exists: bool = _host.secret_exists(name)
    return exists


def http_request(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    timeout_ms: int | None = None,
) -> HttpResponse:
    """One HTTP request through the host (allowlist, credentials injected host-side, scanning)."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    try:
        resp = _host.http_request(method, url, json.dumps(headers or {}), body, timeout_ms)
    except Err as err:
        raise HostError(str(err.value)) from None
    try:
        resp_headers = json.loads(resp.headers_json) if resp.headers_json else {}
    except ValueError:
        resp_headers = {}
    return HttpResponse(resp.status, resp_headers, bytes(resp.body))


def invoke(alias: str, params: dict[str, Any]) -> Any:
    """Call another tool by an alias from the capabilities' ``tool_invoke.aliases``."""
    try:
        out = _host.tool_invoke(alias, json.dumps(params))
    except Err as err:
        raise HostError(str(err.value)) from None
    return json.loads(out) if out else None
