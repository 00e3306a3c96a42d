"""``pincer mcp stdio``: the same MCP server on stdin/stdout, for desktop clients that launch
their servers as child processes.

There is no token on stdio (whoever can start the process already is the user): calls run
under ``[gateway] session`` (``main`` by default) or the session passed in. While serving,
nothing but MCP messages reaches stdout; logs go to stderr. ``pincer mcp stdio`` answers
``initialize`` and ``tools/list`` before this module (and the SDK) is imported, then hands the
conversation over (``stdio_prelude.py``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp.server.stdio import stdio_server

from pincer.gateway.mcp_server import McpExtension, McpGateway
from pincer.gateway.services import mcp_services
from pincer.gateway.stdio_prelude import Handover, SdkStdin, SdkStdout, StdioWire
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.tracing import tracing_on
from pincer.gateway.upstream_mcp import UpstreamMcpExtension

if TYPE_CHECKING:
    from pincer.service import Pincer

logger = logging.getLogger(__name__)

__all__ = ["serve_stdio"]


async def serve_stdio(
    pincer: Pincer,
    *,
    session: str,
    extensions: tuple[McpExtension, ...] = (),
    handover: tuple[Handover, StdioWire] | None = None,
) -> None:
    """Serve MCP over this process's stdio until the client closes stdin. ``handover``: the
    prelude claimed the wire and answered the handshake; the server continues from there."""
    default = GatewaySession(name=session, kind=pincer.config.session(session).kind)
    # The upstream MCP servers' resources and prompts first: the extensions keep them for what is not theirs.
    gateway = McpGateway(mcp_services(pincer), default_session=default, extensions=(UpstreamMcpExtension(), *extensions))
    streams: dict[str, Any] = {}
    if handover is not None:
        state, wire = handover
        streams = {"stdin": SdkStdin(state, wire), "stdout": SdkStdout(state, wire)}
    async with tracing_on(pincer.config.telemetry), gateway.running(), stdio_server(**streams) as (read_stream, write_stream):
        await gateway.server.run(read_stream, write_stream, gateway.server.create_initialization_options())
