"""The canvas on the gateway's wiring: its board, the way people's actions reach runs, and the
canvas as an MCP Apps UI resource.

MCP Apps (``@modelcontextprotocol/ext-apps`` 2.0.4): the canvas tools carry
``_meta.ui.resourceUri = "ui://pincer/canvas/{session}"`` (the caller's session filled in, see
``mcp_server.tool_to_wire``); ``resources/read`` of that URI answers the canvas document with
mime type ``text/html;profile=mcp-app``. The host renders it in its own sandboxed frame; the
document speaks ext-apps' postMessage protocol (``ui/initialize``, then ``tools/call`` of
``canvas_event``, a tool only apps call), so a click in the host's window reaches the run.
A session reads only its own canvas (main reads every one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pincer.canvas.board import CanvasBoard, CanvasEvent, EventSink
from pincer.canvas.frame import VIEW_META_KEY, app_document, view_state
from pincer.core.errors import UsageError
from pincer.gateway.mcp_server import McpGateway, complete
from pincer.llm.run import OutsideData, RunEvent
from pincer.llm.runner import RunManager

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.safety.scanner import LeakScanner

__all__ = ["CanvasMcpExtension", "open_board", "deliver_to_runs", "MCP_APP_MIME_TYPE", "CANVAS_URI_PREFIX"]

logger = logging.getLogger(__name__)

MCP_APP_MIME_TYPE = "text/html;profile=mcp-app"
VIEW_TOOLS = frozenset({"canvas", "a2ui_push", "a2ui_reset"})  # the tools whose _meta.ui names the view
CANVAS_URI_PREFIX = "ui://pincer/canvas/"


def open_board(*, config: Callable[[], Config], scanner: Callable[[], LeakScanner]) -> CanvasBoard:
    """A board whose pushed content passes the service's leak scanner, whose main sessions are
    config's (``[sessions.NAME] kind``, read at each draw so a reload counts), and whose A2UI
    catalogs are the built-in ones and ``[gateway] a2ui_catalogs`` (loaded when first needed,
    again after a reload changes the list)."""
    from pincer.canvas.catalogs import CatalogSet, load_catalogs
    from pincer.policy.session import SessionKind

    def is_main(session: str) -> bool:
        return bool(config().session(session).kind is SessionKind.MAIN)

    loaded: dict[tuple[Any, ...], CatalogSet] = {}
    lock = anyio.Lock()

    async def catalogs() -> CatalogSet:
        now = config()
        key = (now.home, now.gateway.a2ui_catalogs, now.allow_private_network)
        async with lock:
            if key not in loaded:
                found = await load_catalogs(now.gateway.a2ui_catalogs, home=now.home, allow_private=now.allow_private_network)
                loaded.clear()
                loaded[key] = found
            return loaded[key]

    return CanvasBoard(scan=lambda value: scanner().scan(value), is_main=is_main, catalogs=catalogs)


def deliver_to_runs(runs: RunManager) -> EventSink:
    """People's actions as run events (``canvas_event``) and, unless a ``canvas wait`` took
    them, as the input of the run's next turn."""

    def sink(run_id: str, event: CanvasEvent, as_input: bool) -> None:
        data = event.to_dict()
        note = None
        if as_input:
            note = OutsideData(tool=f"canvas:{event.session}", source=event.source, content=json.dumps(data, ensure_ascii=False, default=str))
        runs.deliver(run_id, RunEvent(kind="canvas_event", data=data), note, trusted=event.trusted)

    return sink


def _canvas_session(uri: str) -> str | None:
    """The session a canvas URI names (checked later by the board), or None for another URI."""
    if not uri.startswith(CANVAS_URI_PREFIX):
        return None
    return unquote(uri[len(CANVAS_URI_PREFIX) :])


class CanvasMcpExtension:
    """Serves ``ui://pincer/canvas/{session}`` over ``resources/list`` and ``resources/read``,
    keeping the handlers installed before it (skills, fixtures) for every other URI."""

    def __init__(self, board: CanvasBoard) -> None:
        self.board = board
        self._previous: dict[str, Any] = {}
        self._entries: dict[str, Any] = {}  # the handler entries it replaced, for uninstall

    def install(self, server: Server[Any], gateway: McpGateway) -> None:
        import mcp_types as types

        for method in ("resources/list", "resources/read"):
            entry = server.get_request_handler(method)
            if entry is not None:
                self._previous[method] = entry.handler
                self._entries[method] = entry

        async def list_resources(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
            earlier = await self._earlier("resources/list", ctx, params)
            session = gateway.session_of(ctx).name
            resources = [*earlier.get("resources", []), self._resource(session)]
            return complete(ctx, {**earlier, "resources": resources})

        async def read_resource(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
            uri = str(params.uri)
            wanted = _canvas_session(uri)
            if wanted is None:
                if "resources/read" in self._previous:
                    return _plain(await self._previous["resources/read"](ctx, params))
                raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
            viewer = gateway.session_of(ctx)
            if not viewer.is_main and viewer.name != wanted:
                raise MCPError(INVALID_PARAMS, f"Resource not found: no canvas {wanted[:60]!r} for this session", data={"uri": uri})
            try:
                canvas = self.board.get(wanted)
            except UsageError as exc:
                raise MCPError(INVALID_PARAMS, f"Resource not found: {exc.message}", data={"uri": uri}) from None
            content = {
                "uri": uri,
                "mimeType": MCP_APP_MIME_TYPE,
                "text": app_document(canvas.session, view_state(canvas.session, canvas.revision, canvas.html, canvas.a2ui)),
                # The view needs no network: the host's CSP for it allows no origin.
                "_meta": {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}},
            }
            return complete(ctx, {"contents": [content]})

        server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
        gateway.result_hooks.append(self._with_view)

    def uninstall(self, server: Server[Any], gateway: McpGateway) -> None:
        """Put back the handlers ``install`` wrapped (``[gateway] canvas`` turned off live; the
        gateway's upstream extension always installs both, so there is always one to put back)."""
        for method, entry in self._entries.items():
            server.add_request_handler(method, entry.params_type, entry.handler)
        if self._with_view in gateway.result_hooks:
            gateway.result_hooks.remove(self._with_view)

    def _with_view(self, session: str, tool: str, wire: dict[str, Any]) -> None:
        """A canvas tool's result carries the view's state (``_meta`` ``pincer/canvas-view``): a
        host that cached the view's document shows the canvas as this call left it, from
        ``ui/notifications/tool-result``. ``_meta`` is the host's, not the model's (MCP Apps)."""
        if tool not in VIEW_TOOLS:
            return
        try:
            canvas = self.board.get(session)
        except UsageError:
            return
        meta = wire.setdefault("_meta", {})
        meta[VIEW_META_KEY] = view_state(canvas.session, canvas.revision, canvas.html, canvas.a2ui)

    def _resource(self, session: str) -> dict[str, Any]:
        return {
            "uri": CANVAS_URI_PREFIX + session,
            "name": f"canvas {session}",
            "description": f"the canvas of session {session} (what the agent drew; an MCP App)",
            "mimeType": MCP_APP_MIME_TYPE,
        }

    async def _earlier(self, method: str, ctx: Any, params: Any) -> dict[str, Any]:
        handler = self._previous.get(method)
        return _plain(await handler(ctx, params)) if handler is not None else {}


def _plain(result: Any) -> dict[str, Any]:
    from pydantic import BaseModel

    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result) if isinstance(result, dict) else {}
