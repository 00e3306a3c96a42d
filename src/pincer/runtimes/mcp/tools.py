"""An upstream tool as a pincer ToolSpec: name, effects, and the block of a changed definition.

Effects: the server's configured set, else ``network`` + ``external_write``. A server or tool
marked read-only in pincer's config drops ``external_write``; so does a tool whose annotations
say ``readOnlyHint: true`` without ``destructiveHint: true``. Annotations are the server's own
claims, so they can only narrow what the config allows, never widen it; and with
``network`` always present, every MCP tool asks under the default policy until a grant says
otherwise — destructive ones (``destructiveHint: true``) keep ``external_write`` whatever the
annotations say, so a grant for read-only effects never lets them through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.values import ToolSpec
from pincer.runtimes.mcp.config import ServerConfig, tool_name
from pincer.runtimes.mcp.pins import ToolDefinition

__all__ = ["DEFAULT_EFFECTS", "effects_for", "build_spec"]

DEFAULT_EFFECTS = frozenset({EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE})


def effects_for(server: ServerConfig, tool: ToolDefinition) -> frozenset[EffectKind]:
    effects = set(server.effects if server.effects is not None else DEFAULT_EFFECTS)
    hints = tool.annotations
    destructive = hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True
    if server.read_only or tool.name in server.read_only_tools or (hints.get("readOnlyHint") is True and not destructive):
        effects.discard(EffectKind.EXTERNAL_WRITE)
    if destructive and not (server.read_only or tool.name in server.read_only_tools):
        effects.add(EffectKind.EXTERNAL_WRITE)
    return frozenset(effects)


def build_spec(
    server: ServerConfig,
    tool: ToolDefinition,
    *,
    blocked: str | None = None,
) -> ToolSpec:
    """The registry entry for ``tool``. ``blocked``: why calls are refused (the definition
    shown is then the pinned one the caller passes in)."""
    effects = effects_for(server, tool)
    annotations: dict[str, Any] = {"server": server.name, "upstream_name": tool.name}
    if tool.annotations:
        annotations["mcp"] = dict(tool.annotations)
    if tool.annotations.get("destructiveHint") is True and tool.annotations.get("readOnlyHint") is not True:
        annotations["destructive"] = True
    if tool.title:
        annotations["title"] = tool.title
    if blocked is not None:
        annotations["blocked"] = blocked
    schema: Mapping[str, Any] = tool.input_schema if isinstance(tool.input_schema, Mapping) else {"type": "object"}
    return ToolSpec(
        name=tool_name(server.name, tool.name),
        description=tool.description,
        input_schema=schema,
        effects=effects,
        runtime=RuntimeKind.MCP,
        side_effecting=EffectKind.EXTERNAL_WRITE in effects,
        source=f"mcp:{server.name}",
        output_schema=tool.output_schema,
        annotations=annotations,
    )
