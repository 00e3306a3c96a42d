"""MCP servers as pincer tools: stdio, legacy SSE and streamable HTTP, both protocol eras.

One long-lived connection per server (:mod:`.connection`), started lazily or eagerly, restarted
with backoff; stdio servers run under a supervisor so nothing they start outlives pincer
(:mod:`.stdio`, :mod:`.supervisor`) with a whitelisted environment (:mod:`.environment`); tool
definitions are leak-scanned and pinned with their registry names and effect annotations
(:mod:`.pins`, :mod:`.assignment`); effects follow the table in :mod:`.tools`; server entries live
in ``$PINCER_HOME/mcp/servers.json`` (:mod:`.config`) and can be imported from other clients'
files (:mod:`.importers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pincer.runtimes.mcp.config import ServerConfig, ServerStore, parse_servers, tool_name
    from pincer.runtimes.mcp.connection import ServerConnection, ServerStatus
    from pincer.runtimes.mcp.importers import import_data
    from pincer.runtimes.mcp.pins import Pin, PinStore, ToolDefinition, describe_change
    from pincer.runtimes.mcp.runtime import McpRuntime

__all__ = [
    "McpRuntime",
    "Pin",
    "PinStore",
    "ServerConfig",
    "ServerConnection",
    "ServerStatus",
    "ServerStore",
    "ToolDefinition",
    "describe_change",
    "import_data",
    "parse_servers",
    "tool_name",
]

# Imported on first use: the connection pulls in the MCP SDK, which reading servers.json does not need.
_EXPORTS = {
    "ServerConfig": "pincer.runtimes.mcp.config",
    "ServerStore": "pincer.runtimes.mcp.config",
    "parse_servers": "pincer.runtimes.mcp.config",
    "tool_name": "pincer.runtimes.mcp.config",
    "import_data": "pincer.runtimes.mcp.importers",
    "ServerConnection": "pincer.runtimes.mcp.connection",
    "ServerStatus": "pincer.runtimes.mcp.connection",
    "Pin": "pincer.runtimes.mcp.pins",
    "PinStore": "pincer.runtimes.mcp.pins",
    "ToolDefinition": "pincer.runtimes.mcp.pins",
    "describe_change": "pincer.runtimes.mcp.pins",
    "McpRuntime": "pincer.runtimes.mcp.runtime",
}


__getattr__ = lazy_attributes(__name__, globals(), _EXPORTS)
