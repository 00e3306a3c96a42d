"""The canvas follows ``[gateway] canvas`` while the gateway serves.

Turned on (at start, or by an edit of config.toml under a running gateway): a board is opened,
its MCP resource (``ui://pincer/canvas/{session}``, gateway/canvas_mcp.py) is installed on the
gateway's MCP server, its tools (``canvas``, ``a2ui_push``, ``a2ui_reset``) are registered (MCP
clients hear ``notifications/tools/list_changed``, and ``notifications/resources/list_changed``
for the resource) and its pages answer under ``/ui/canvas``. Turned off: the tools leave, the
resource handlers are put back as they were (clients hear both notifications again) and the
pages answer as if the canvas had never been on. The canvas modules are imported only when it is on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import ASGIApp

from pincer.core.errors import PincerError

if TYPE_CHECKING:
    from pincer.canvas.board import CanvasBoard
    from pincer.config import Config
    from pincer.gateway.canvas_mcp import CanvasMcpExtension
    from pincer.gateway.mcp_server import McpGateway
    from pincer.gateway.ui.auth import UiAuth
    from pincer.llm.runner import RunManager
    from pincer.runtimes.base import Runtime
    from pincer.safety.scanner import LeakScanner

logger = logging.getLogger(__name__)

__all__ = ["CanvasServices", "LiveCanvas"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CanvasServices:
    """What the canvas uses of the service (``gateway/services.py`` makes it of a Pincer):
    config.toml now (its main sessions and A2UI catalogs), the leak scanner pushed content
    passes, and where its tools come and go."""

    config: Callable[[], Config]
    scanner: Callable[[], LeakScanner]
    add_runtime: Callable[[Runtime], Awaitable[None]]
    remove_runtime: Callable[[Runtime], Awaitable[None]]


class LiveCanvas:
    """The canvas's parts while it is on; ``follow`` turns it on or off."""

    def __init__(self, services: CanvasServices, *, runs: RunManager, auth: UiAuth) -> None:
        self._services = services
        self._runs = runs
        self._auth = auth
        self._mcp: McpGateway | None = None
        self._base_url: str | None = None
        self.board: CanvasBoard | None = None  # while on
        self.pages: ASGIApp | None = None  # the /ui/canvas routes while on
        self._runtime: Runtime | None = None
        self._extension: CanvasMcpExtension | None = None

    def attach(self, mcp: McpGateway) -> None:
        self._mcp = mcp

    @property
    def base_url(self) -> str | None:
        return self._base_url

    @base_url.setter
    def base_url(self, url: str | None) -> None:
        """The gateway's own URL (canvas snapshots open the frame on it)."""
        self._base_url = url
        if self.board is not None:
            self.board.base_url = url

    async def follow(self, on: bool) -> None:
        """Turn the canvas on or off; a canvas that cannot start (its renderer is not built)
        stays off and the log says why and what fixes it."""
        if on and self.board is None:
            try:
                await self._start()
            except PincerError as exc:
                logger.error("[gateway] canvas = true not applied, the canvas stays off: %s%s",
                             exc.message, f"; {exc.hint}" if exc.hint else "")  # fmt: skip
        elif not on and self.board is not None:
            await self._stop()

    async def _start(self) -> None:
        from pincer.canvas.frame import renderer_script
        from pincer.canvas.tool import canvas_runtime
        from pincer.gateway.canvas_mcp import CanvasMcpExtension, deliver_to_runs, open_board
        from pincer.gateway.canvas_pages import canvas_app

        assert self._mcp is not None, "attach the MCP gateway first"
        renderer_script()  # a checkout without the built renderer: refused, with the hint
        board = open_board(config=self._services.config, scanner=self._services.scanner)
        board.sink = deliver_to_runs(self._runs)
        board.base_url = self._base_url
        extension = CanvasMcpExtension(board)
        extension.install(self._mcp.server, self._mcp)
        runtime = canvas_runtime(board)
        try:
            await self._services.add_runtime(runtime)
        except BaseException:
            extension.uninstall(self._mcp.server, self._mcp)
            raise
        self.board, self._extension, self._runtime = board, extension, runtime
        self.pages = canvas_app(board, auth=self._auth)
        self._mcp.schedule_notification("resources")  # the canvas's resource is listed from now on
        logger.info("the canvas is on: its tools, its MCP resource and its pages at /ui/canvas/SESSION")

    async def _stop(self) -> None:
        assert self._mcp is not None
        runtime, extension = self._runtime, self._extension
        assert runtime is not None and extension is not None  # on: _start set them
        self.board, self.pages, self._runtime, self._extension = None, None, None, None
        extension.uninstall(self._mcp.server, self._mcp)
        self._mcp.schedule_notification("resources")  # its resource is no longer listed
        await self._services.remove_runtime(runtime)
        logger.info("the canvas is off: its tools and pages are withdrawn")
