"""What pincer's MCP server says on the wire that needs no MCP SDK: its instructions, its server
identity and a ToolSpec as an MCP ``Tool``. The SDK-backed server (``mcp_server.py``) and the
stdio prelude (``stdio_prelude.py``, which answers before the SDK is imported) share them."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pincer import __version__
from pincer.core.values import ToolSpec

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "server_info", "add_task_support", "tool_to_wire"]

SERVER_NAME = "pincer"
INSTRUCTIONS = (
    "pincer serves governed tools: every call is checked against policy, may wait for a person's "
    "approval, and is recorded in an audit log. A refused call explains why."
)
_ANNOTATION_KEYS = frozenset({"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"})


def server_info() -> dict[str, str]:
    """The ``serverInfo`` of ``initialize`` (the SDK server is built with the same values)."""
    return {"name": SERVER_NAME, "title": SERVER_NAME, "version": __version__}


def tool_to_wire(spec: ToolSpec, *, session: str | None = None) -> dict[str, Any]:
    """A registry ToolSpec as an MCP ``Tool`` object. A tool with an MCP Apps view (annotation
    ``pincer/ui``: ``resourceUri`` with ``{session}``, ``visibility``) gets ``_meta.ui`` with the
    caller's session filled in.

    An upstream MCP server's tool (``annotations["mcp"]``) is passed on whole: its annotations
    exactly as the server sent them (pincer adds none and removes none), its title, and its
    ``_meta`` (an MCP App's ``ui`` among it, ``runtimes/mcp/uris.py``). pincer's decision sits
    beside them under ``_meta["pincer/effects"]``: hints are the server's claims, shown to the
    client, never what the call chain decides by."""
    tool: dict[str, Any] = {"name": spec.name, "description": spec.description, "inputSchema": dict(spec.input_schema)}
    if spec.output_schema:
        tool["outputSchema"] = dict(spec.output_schema)
    upstream = spec.annotations.get("mcp")
    meta: dict[str, Any] = {}
    if isinstance(upstream, Mapping):
        if isinstance(spec.annotations.get("title"), str):
            tool["title"] = spec.annotations["title"]
        annotations = dict(upstream)
        upstream_meta = spec.annotations.get("mcp_meta")
        if isinstance(upstream_meta, Mapping):
            meta.update(upstream_meta)
    else:
        annotations = {k: v for k, v in spec.annotations.items() if k in _ANNOTATION_KEYS}
        if not spec.effects or all(e.value == "read_filesystem" for e in spec.effects):
            annotations.setdefault("readOnlyHint", True)
    if annotations:
        tool["annotations"] = annotations
    meta["pincer/effects"] = sorted(e.value for e in spec.effects)
    meta["pincer/runtime"] = spec.runtime.value
    tool["_meta"] = meta
    ui = spec.annotations.get("pincer/ui")
    if isinstance(ui, Mapping) and session is not None and isinstance(ui.get("resourceUri"), str):
        uri = ui["resourceUri"].replace("{session}", session)
        tool["_meta"]["ui"] = {**dict(ui), "resourceUri": uri}
        tool["_meta"]["ui/resourceUri"] = uri  # the ext-apps key of hosts from before _meta.ui
    return tool


def add_task_support(tools: list[dict[str, Any]], *, enabled: bool, only: Collection[str]) -> list[dict[str, Any]]:
    """Each wire tool's 2025-11-25 ``execution.taskSupport`` (the 2026-07-28 sieve drops it: no
    such field there): every tool may run as a task while tasks are on, a tool of ``[tasks] only``
    must. The SDK server and ``pincer mcp stdio``'s prelude list tools through this alike."""
    for tool in tools:
        support = "forbidden" if not enabled else "required" if tool["name"] in only else "optional"
        tool["execution"] = {"taskSupport": support}
    return tools
