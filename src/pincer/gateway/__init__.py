"""The gateway: every governed tool over MCP (streamable HTTP and stdio, both protocol eras)
and a REST API, behind a bearer token and DNS-rebinding checks.

    async with Pincer.open(home) as pincer:
        await serve(pincer, settings=pincer.config.gateway, host="127.0.0.1", port=8765)
"""

from pincer.gateway.app import Gateway, create_gateway
from pincer.gateway.channel import ClientCapabilityMissing, InputRequired, McpChannel
from pincer.gateway.mcp_server import McpExtension, McpGateway
from pincer.gateway.serve import ServeInfo, serve
from pincer.gateway.stdio import serve_stdio
from pincer.gateway.tokens import GatewaySession, TokenBook, load_or_create_token, new_token, token_digest

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
