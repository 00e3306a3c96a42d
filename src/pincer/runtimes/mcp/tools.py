"""An upstream tool as a pincer ToolSpec: name, effects, and the block of a changed definition.

Effects, decided in this order (docs/mcp-servers.md shows the same table):

1. A per-tool override in the server entry (``"tools": {"TOOL": {"effects": [...]}}`` in
   ``servers.json``, ``--tool-effects TOOL=a,b`` on ``pincer mcp add``) is the tool's effect set,
   exactly; annotations do not change it (the user has said what the tool does).
2. Otherwise the base set is the server's ``effects`` (``--effects a,b``), else the default:

   =====================  ====================================================================
   server                 default effects
   =====================  ====================================================================
   remote (http, sse)     ``network`` + ``external_write`` (network is inherent: every call
                          crosses it)
   stdio                  ``external_write`` (a local process gets ``network`` only when its
                          entry declares it, in ``effects``, or a tool says ``openWorldHint``)
   =====================  ====================================================================

3. Then the tool's annotations and the entry's read-only marks change the base set:

   ===========================================  ==============================================
   annotation (or config)                       change to the base set
   ===========================================  ==============================================
   ``readOnlyHint: true`` (without              the write effects (``external_write``,
   ``destructiveHint: true``); ``read_only``     ``write_filesystem``, ``delete_filesystem``,
   or ``read_only_tools`` in the entry          ``financial``) are removed
   ``destructiveHint: true`` (without           the write effects stay; with none in the base
   ``readOnlyHint: true``; not read-only in     set, ``external_write`` is added
   the entry)
   ``openWorldHint: true``                      ``network`` is added
   ``openWorldHint: false``                     ``network`` is removed (stdio only: a remote
                                                server is reached over the network anyway)
   absent or not a boolean                      no change
   ===========================================  ==============================================

A tool is side-effecting when a write effect remains. Annotations are the server's own claims:
they narrow the config's set only towards what the hints say, and every widening they cause
makes a call stricter, never looser. They are part of the pin (:mod:`.pins`), so a server cannot
start calling a tool read-only without ``pincer mcp trust``. Under the default policy a tool with
no effect left, or only ``read_filesystem``, runs without asking (a read-only tool of a local
server, like ``mcp-server-time``'s); any other effect asks until a grant says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.values import ToolSpec
from pincer.runtimes.mcp.config import ServerConfig
from pincer.runtimes.mcp.pins import ToolDefinition

__all__ = ["DEFAULT_EFFECTS", "STDIO_DEFAULT_EFFECTS", "WRITE_EFFECTS", "default_effects", "effects_for", "build_spec"]

DEFAULT_EFFECTS = frozenset({EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE})  # remote servers
STDIO_DEFAULT_EFFECTS = frozenset({EffectKind.EXTERNAL_WRITE})
WRITE_EFFECTS = frozenset(
    {EffectKind.EXTERNAL_WRITE, EffectKind.WRITE_FILESYSTEM, EffectKind.DELETE_FILESYSTEM, EffectKind.FINANCIAL}
)


def default_effects(server: ServerConfig) -> frozenset[EffectKind]:
    """The base set before annotations: the entry's ``effects``, else the transport's default."""
    if server.effects is not None:
        return server.effects
    return STDIO_DEFAULT_EFFECTS if server.transport == "stdio" else DEFAULT_EFFECTS


def _is_destructive(hints: Mapping[str, Any]) -> bool:
    return hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True


def effects_for(server: ServerConfig, tool: ToolDefinition) -> frozenset[EffectKind]:
    override = server.tool_effects.get(tool.name)
    if override is not None:
        return override
    effects = set(default_effects(server))
    hints = tool.annotations
    configured_read_only = server.read_only or tool.name in server.read_only_tools
    if configured_read_only or (hints.get("readOnlyHint") is True and not _is_destructive(hints)):
        effects -= WRITE_EFFECTS
    elif _is_destructive(hints) and not effects & WRITE_EFFECTS:
        effects.add(EffectKind.EXTERNAL_WRITE)
    open_world = hints.get("openWorldHint")
    if open_world is True:
        effects.add(EffectKind.NETWORK)
    elif open_world is False and server.transport == "stdio":
        effects.discard(EffectKind.NETWORK)
    return frozenset(effects)


def build_spec(
    server: ServerConfig,
    tool: ToolDefinition,
    *,
    registry_name: str,
    blocked: str | None = None,
) -> ToolSpec:
    """The registry entry for ``tool`` under ``registry_name``. ``blocked``: why calls are
    refused (the definition shown is then the pinned one the caller passes in)."""
    effects = effects_for(server, tool)
    annotations: dict[str, Any] = {"server": server.name, "upstream_name": tool.name}
    if tool.annotations:
        annotations["mcp"] = dict(tool.annotations)
    if _is_destructive(tool.annotations):
        annotations["destructive"] = True
    if tool.title:
        annotations["title"] = tool.title
    if server.capabilities:
        annotations["capabilities"] = list(server.capabilities)
    if blocked is not None:
        annotations["blocked"] = blocked
    schema: Mapping[str, Any] = tool.input_schema if isinstance(tool.input_schema, Mapping) else {"type": "object"}
    return ToolSpec(
        name=registry_name,
        description=tool.description,
        input_schema=schema,
        effects=effects,
        runtime=RuntimeKind.MCP,
        side_effecting=bool(effects & WRITE_EFFECTS),
        source=f"mcp:{server.name}",
        output_schema=tool.output_schema,
        annotations=annotations,
    )
