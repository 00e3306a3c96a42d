"""The gateway: every governed tool over MCP (streamable HTTP and stdio, both protocol eras)
and a REST API, behind a bearer token and DNS-rebinding checks.

    async with Pincer.open(home) as pincer:
        await serve(pincer, settings=pincer.config.gateway, host="127.0.0.1", port=8765)

The names below load on first use: ``pincer token`` needs ``pincer.gateway.tokens`` only and
must not pay for importing the MCP SDK, Starlette and uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pincer.core.errors import ClientCapabilityMissing, InputRequired
    from pincer.gateway.app import Gateway, create_gateway
    from pincer.gateway.channel import McpChannel
    from pincer.gateway.mcp_server import McpExtension, McpGateway
    from pincer.gateway.serve import ServeInfo, serve
    from pincer.gateway.stdio import serve_stdio
    from pincer.gateway.tokens import GatewaySession, TokenBook, load_or_create_token, new_token, token_digest

_HOMES = {
    "Gateway": "pincer.gateway.app",
    "create_gateway": "pincer.gateway.app",
    "McpGateway": "pincer.gateway.mcp_server",
    "McpExtension": "pincer.gateway.mcp_server",
    "McpChannel": "pincer.gateway.channel",
    "InputRequired": "pincer.core.errors",
    "ClientCapabilityMissing": "pincer.core.errors",
    "ServeInfo": "pincer.gateway.serve",
    "serve": "pincer.gateway.serve",
    "serve_stdio": "pincer.gateway.stdio",
    "GatewaySession": "pincer.gateway.tokens",
    "TokenBook": "pincer.gateway.tokens",
    "load_or_create_token": "pincer.gateway.tokens",
    "new_token": "pincer.gateway.tokens",
    "token_digest": "pincer.gateway.tokens",
}
__all__ = [
    "Gateway",
    "create_gateway",
    "McpGateway",
    "McpExtension",
    "McpChannel",
    "InputRequired",
    "ClientCapabilityMissing",
    "ServeInfo",
    "serve",
    "serve_stdio",
    "GatewaySession",
    "TokenBook",
    "load_or_create_token",
    "new_token",
    "token_digest",
]


__getattr__ = lazy_attributes(__name__, globals(), _HOMES)
