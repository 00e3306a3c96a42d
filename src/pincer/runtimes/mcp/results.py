"""A server's ``CallToolResult`` as a ToolOutput.

The content blocks (text, image, audio, resource links, embedded resources) pass through in
their MCP wire shape, so the gateway hands them to its own clients unchanged (after the leak
scan) but for their resource URIs, given as the gateway serves them. ``value`` is what the CLI
and REST show: the structured content when the server sent one, else the text blocks joined,
else a short line per non-text block. ``isError`` becomes ``is_error``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from pincer.core.values import ToolOutput
from pincer.runtimes.mcp.uris import namespaced_blocks

__all__ = ["to_tool_output", "describe_block"]


def _data_bytes(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def describe_block(block: Mapping[str, Any]) -> str:
    """A one-line stand-in for a non-text block (the block itself travels in ``content``)."""
    kind = block.get("type")
    if kind in ("image", "audio"):
        size = _data_bytes(str(block.get("data", "")))
        return f"[{kind} {block.get('mimeType', '?')}, {size} bytes]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri', '?')}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if isinstance(resource, Mapping) and "text" in resource:
            return str(resource.get("text", ""))
        uri = resource.get("uri", "?") if isinstance(resource, Mapping) else "?"
        return f"[resource {uri}]"
    return f"[{kind} block]"


def to_tool_output(result: types.CallToolResult, *, server: str | None = None) -> ToolOutput:
    """``server``: the server that answered, whose resource links and embedded resources are
    given the URIs the gateway serves them under (:mod:`.uris`)."""
    blocks: tuple[Mapping[str, Any], ...] = tuple(
        block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in result.content
    )
    if server is not None:
        blocks = tuple(namespaced_blocks(server, blocks))
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    value: Any
    if result.structured_content is not None and not result.is_error:
        value = result.structured_content
    elif texts and len(texts) == len(blocks):
        value = texts[0] if len(texts) == 1 else "\n".join(texts)
    elif blocks:
        value = "\n".join(str(b.get("text", "")) if b.get("type") == "text" else describe_block(b) for b in blocks)
    else:
        value = "" if result.is_error else None
    if result.is_error and not isinstance(value, str):
        value = str(value)
    return ToolOutput(value=value, content=blocks or None, is_error=result.is_error)
