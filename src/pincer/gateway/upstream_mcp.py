"""The upstream MCP servers' resources, resource templates and prompts, served by the gateway.

What a configured server offers besides tools reaches the gateway's clients, namespaced like its
tools (``runtimes/mcp/uris.py``: ``demo://resource/1`` of server ``everything`` is
``demo://everything/resource/1``; its prompt ``simple-prompt`` is ``everything_simple_prompt``):

- ``resources/list``, ``resources/templates/list`` and ``prompts/list`` list every server whose
  read operation the caller's session may see (``runtimes/mcp/operations.py``: a session that
  may not see ``github_resources/read`` sees none of ``github``'s resources), starting lazy
  servers as a call would; each server's entries are leak-scanned. A server that fails to answer
  is left out with a warning, the others are listed.
- ``resources/read`` and ``prompts/get`` are calls through the chain (``dispatch.Operation``):
  session policy, grants, an approval when one is needed (asked as for ``tools/call``), one
  audit record, the leak scan of what comes back, ``[output] max_resource_bytes``. A session
  that may not see the operation is refused by the chain (recorded) and answered as for a
  resource or prompt that does not exist.
- An MCP App's page is one of these resources: its tool's ``_meta.ui.resourceUri`` names the
  served ``ui://`` URI (``gateway/wire.py``), ``resources/read`` returns the upstream's HTML,
  scanned; the App's own calls (``tools/call`` from the host on its behalf) are tool calls like
  any other.
- When a server says its resources or prompts changed, or servers come and go, clients hear
  ``notifications/resources/list_changed`` / ``prompts/list_changed`` (handshake era) or the
  matching ``subscriptions/listen`` events (2026-07-28).

Every gateway installs it first (``app.create_gateway``, ``stdio.serve_stdio``): the extensions
after it keep its handlers for the URIs and prompt names that are not theirs (skills, the canvas).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from pincer.core.values import CallRequest, ToolResult
from pincer.gateway.channel import McpChannel
from pincer.gateway.mcp_server import McpGateway, complete
from pincer.gateway.tokens import GatewaySession
from pincer.policy.visibility import can_see
from pincer.runtimes.mcp.operations import operation_name

if TYPE_CHECKING:
    from pincer.runtimes.mcp.runtime import McpRuntime

logger = logging.getLogger(__name__)

__all__ = ["UpstreamMcpExtension", "LIST_TIMEOUT_S"]

LIST_TIMEOUT_S = 30.0  # one server's listing (its start included); servers are listed side by side
# Failures of the server or its connection, not of the request: the JSON-RPC internal error.
_SERVER_FAILURES = frozenset({"tool_timeout", "runtime_unavailable", "tool_error"})
_LISTS = {
    "resources": ("resources/read", "resources"),
    "resource_templates": ("resources/read", "resourceTemplates"),
    "prompts": ("prompts/get", "prompts"),
}


class UpstreamMcpExtension:
    """The five request handlers (an ``McpExtension``), over ``gateway.services.upstream()`` as it is at
    each request (a reloaded server list may replace it)."""

    def __init__(self) -> None:
        self._gateway: McpGateway | None = None
        self._runtime_seen: McpRuntime | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def gateway(self) -> McpGateway:
        assert self._gateway is not None, "install() the extension first"
        return self._gateway

    def install(self, server: Server[Any], gateway: McpGateway) -> None:
        self._gateway = gateway
        server.add_request_handler("resources/list", types.PaginatedRequestParams, self._list_resources)
        server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, self._list_templates)
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, self._read_resource)
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, self._list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        self._follow()

    # -- the runtime and its changes -----------------------------------------------------------

    def _runtime(self) -> McpRuntime | None:
        runtime = self.gateway.services.upstream()
        if runtime is not self._runtime_seen:
            self._follow()
        return runtime

    def _follow(self) -> None:
        """Subscribe to the current runtime's list changes (a reload may have replaced it)."""
        runtime = self.gateway.services.upstream()
        if runtime is self._runtime_seen:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._runtime_seen = runtime
        if runtime is not None:
            self._unsubscribe = runtime.subscribe_lists(self.gateway.schedule_notification)

    # -- listings --------------------------------------------------------------------------------

    def _servers(self, runtime: McpRuntime, ctx: ServerRequestContext[Any, Any], method: str) -> list[str]:
        """The servers whose ``method`` operation the caller's session may see."""
        policy = self.gateway.services.config().session(self.gateway.session_of(ctx).name)
        return [name for name, config in runtime.servers.items() if can_see(policy, operation_name(config, method))]

    async def _listed(self, ctx: ServerRequestContext[Any, Any], kind: str) -> list[dict[str, Any]]:
        method, _ = _LISTS[kind]
        runtime = self._runtime()
        if runtime is None:
            return []
        servers = self._servers(runtime, ctx, method)
        found: dict[str, list[dict[str, Any]]] = {}

        async def one(server: str) -> None:
            try:
                found[server] = await runtime.listing(server, kind, timeout_s=LIST_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - one broken server must not empty the list
                logger.warning("MCP server %s: %s not listed (%s); `pincer mcp test %s` shows why",
                               server, kind.replace("_", " "), type(exc).__name__, server)

        async with anyio.create_task_group() as tg:
            for server in servers:
                tg.start_soon(one, server)
        return [item for server in servers for item in found.get(server, [])]

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"resources": await self._listed(ctx, "resources")})

    async def _list_templates(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"resourceTemplates": await self._listed(ctx, "resource_templates")})

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        prompts: list[dict[str, Any]] = []
        taken: set[str] = set()
        for prompt in await self._listed(ctx, "prompts"):
            if prompt.get("name") not in taken:  # two upstream names that namespace alike: the first
                taken.add(str(prompt.get("name")))
                prompts.append(prompt)
        return complete(ctx, {"prompts": prompts})

    # -- reads through the chain -----------------------------------------------------------------

    async def _read_resource(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        from pincer.runtimes.mcp.uris import split_uri

        uri = str(params.uri)
        runtime = self._runtime()
        found = split_uri(uri)
        if runtime is None or found is None or found[0] not in runtime.servers:
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
        server, upstream = found
        result = await self._through_chain(ctx, runtime, server, "resources/read", {"uri": upstream})
        if result is None:
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
        contents = [_content(uri, block) for block in result.content or ()]
        return complete(ctx, {"contents": contents, "_meta": _audit_meta(result)})

    async def _get_prompt(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        name = str(params.name)
        runtime = self._runtime()
        target = await self._prompt_target(ctx, runtime, name) if runtime is not None else None
        if runtime is None or target is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", data={"name": name})
        server, upstream = target
        args = {"name": upstream, "arguments": dict(params.arguments or {})}
        result = await self._through_chain(ctx, runtime, server, "prompts/get", args)
        if result is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", data={"name": name})
        output = result.output if isinstance(result.output, Mapping) else {}
        messages = output.get("messages")
        if not isinstance(messages, list):  # cut by the size limit: what is left, as one message
            messages = [{"role": "user", "content": {"type": "text", "text": str(result.output)}}]
        answer: dict[str, Any] = {"messages": messages, "_meta": _audit_meta(result)}
        if isinstance(output.get("description"), str):
            answer["description"] = output["description"]
        return complete(ctx, answer)

    async def _prompt_target(self, ctx: ServerRequestContext[Any, Any], runtime: McpRuntime, name: str) -> tuple[str, str] | None:
        """(server, its own prompt name) for a listed name. A server the session may not see is
        never started for it: the name is matched by its prefix, and the chain refuses it."""
        policy = self.gateway.services.config().session(self.gateway.session_of(ctx).name)
        for server in sorted(runtime.servers, key=len, reverse=True):  # the longest prefix first
            prefix = f"{runtime.servers[server].prefix}_"
            if not name.startswith(prefix):
                continue
            if not can_see(policy, operation_name(runtime.servers[server], "prompts/get")):
                return server, name[len(prefix) :]
            upstream = await runtime.find_prompt(server, name, timeout_s=LIST_TIMEOUT_S)
            if upstream is not None:
                return server, upstream
        return None

    async def _through_chain(
        self, ctx: ServerRequestContext[Any, Any], runtime: McpRuntime, server: str, method: str, args: dict[str, Any]
    ) -> ToolResult | None:
        """The operation's result, None when the session may not see it (refused and recorded by
        the chain). Raises MCPError for any other failure, with its audit id."""
        from pincer.dispatch import Operation

        session: GatewaySession = self.gateway.session_of(ctx)
        spec = runtime.operation(server, method)
        channel = McpChannel.from_context(ctx)
        request = CallRequest(tool=spec.name, args=args, session=session.name, caller="mcp", client=channel)
        result = await self.gateway.run_operation(request, channel, session, Operation(spec=spec, runtime=runtime))
        if result.ok:
            return result
        policy = self.gateway.services.config().session(session.name)
        if not can_see(policy, spec.name):
            return None
        error = dict(result.error or {})
        message = str(error.get("message", f"{method} failed"))
        if error.get("hint"):
            message += f" (hint: {error['hint']})"
        code = INTERNAL_ERROR if error.get("code") in _SERVER_FAILURES else INVALID_PARAMS
        raise MCPError(code, message, data={"auditId": result.audit_id, "pincer/error": error})


def _audit_meta(result: ToolResult) -> dict[str, Any]:
    return {"pincer/auditId": result.audit_id}


def _content(uri: str, block: Mapping[str, Any]) -> dict[str, Any]:
    """One content of a resources/read answer from the chain's block: the embedded resource, or
    the note the size limit left in its place."""
    resource = block.get("resource")
    if block.get("type") == "resource" and isinstance(resource, Mapping):
        return dict(resource)
    return {"uri": uri, "mimeType": "text/plain", "text": str(block.get("text", ""))}
