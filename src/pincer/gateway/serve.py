"""``pincer serve``: the gateway under uvicorn, loopback only unless told otherwise."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import uvicorn

from pincer.config import GatewaySettings
from pincer.core.errors import ConfigError, UsageError
from pincer.gateway.app import Gateway, create_gateway
from pincer.gateway.guard import is_loopback_host
from pincer.gateway.mcp_server import McpExtension
from pincer.gateway.tokens import load_or_create_token
from pincer.gateway.tracing import tracing_on

if TYPE_CHECKING:
    from pincer.service import Pincer

logger = logging.getLogger(__name__)

__all__ = ["ServeInfo", "serve", "check_bind_host", "SHUTDOWN_GRACE_S"]

# uvicorn waits this long for open connections (SSE streams stay open) before closing them.
# Whole seconds: uvicorn's Config takes an int; a fraction would be rounded up, never cut short.
SHUTDOWN_GRACE_S = 3
STARTUP_POLL_S = 0.01
METRICS_HOST = "127.0.0.1"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeInfo:
    """Where the gateway listens, once it does."""

    host: str
    port: int
    url: str
    mcp_url: str
    api_url: str
    token_file: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "mcp_url": self.mcp_url,
            "api_url": self.api_url,
            "openapi_url": f"{self.api_url}/openapi.json",
            "host": self.host,
            "port": self.port,
            "token_file": self.token_file,
        }


def check_bind_host(host: str, settings: GatewaySettings) -> None:
    """Refuse a non-loopback address unless ``[gateway] allow_remote`` says so."""
    if is_loopback_host(host):
        return
    if not settings.allow_remote:
        raise UsageError(
            f"refusing to listen on {host}: the gateway is loopback-only by default",
            hint="use 127.0.0.1, or set allow_remote = true under [gateway] in config.toml (put TLS in front)",
        )


async def serve(
    pincer: Pincer,
    *,
    settings: GatewaySettings,
    host: str,
    port: int,
    on_ready: Callable[[ServeInfo], Awaitable[None] | None] | None = None,
    extensions: tuple[McpExtension, ...] = (),
) -> None:
    """Serve until cancelled or interrupted; ``on_ready`` hears the bound address. Traces are
    exported while it serves when ``[telemetry] traces`` says so."""
    check_bind_host(host, settings)
    async with tracing_on(pincer.config.telemetry):
        await _serve(pincer, settings=settings, host=host, port=port, on_ready=on_ready, extensions=extensions)


def _bind(host: str, port: int, hint: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio turns Nagle off only on sockets that say they are TCP,
    # and with Nagle on every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint=hint) from exc
    return sock


async def _serve(
    pincer: Pincer,
    *,
    settings: GatewaySettings,
    host: str,
    port: int,
    on_ready: Callable[[ServeInfo], Awaitable[None] | None] | None,
    extensions: tuple[McpExtension, ...],
) -> None:
    token = load_or_create_token(pincer.home)
    gateway = create_gateway(pincer, settings=settings, token=token, bound_host=host, extensions=extensions)
    sock = _bind(host, port, "pick another port with --port (0 picks a free one)")
    try:
        metrics_server = _metrics_server(pincer, gateway)
    except BaseException:
        sock.close()
        raise
    bound_port = sock.getsockname()[1]
    pincer.serving_at(host, bound_port)
    config = uvicorn.Config(
        gateway.app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        server_header=False,
        # Off: uvicorn would take X-Forwarded-For from any loopback client as the client's
        # address, so a local agent naming a new address on every guess would get a fresh
        # failure window each time (sign-in, bearer tokens, webhooks) and could make the
        # gateway blame an address of its choosing. The hub server does the same.
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{bound_port}"
    gateway.mcp.public_url = base
    if gateway.canvas is not None:
        gateway.canvas.base_url = base  # canvas snapshots open the frame on this server
    info = ServeInfo(
        host=host,
        port=bound_port,
        url=base,
        mcp_url=f"{base}/mcp",
        api_url=f"{base}/api/v1",
        token_file=str(pincer.home / "gateway.token"),
    )

    if pincer.instances is not None:  # on a shared store: this row is a gateway's, not a command's
        try:
            await pincer.instances.serving(base)
        except BaseException:
            sock.close()
            raise

    async def announce() -> None:
        if on_ready is not None:
            outcome = on_ready(info)
            if outcome is not None:
                await outcome

    finished = anyio.Event()

    async def run_server() -> None:
        try:
            # Shielded: a cancelled caller asks uvicorn to stop (below) and waits for the
            # graceful shutdown instead of tearing connections down mid-response.
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=[sock])
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_server)
        if metrics_server is not None:
            tg.start_soon(_run_metrics, *metrics_server)
        watcher = anyio.CancelScope()
        watch = pincer.watch_state

        async def watch_tools(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            # What other processes change: installed tools, MCP servers, config.toml (reload.py).
            with watcher:
                await watch(task_status=task_status)

        await tg.start(watch_tools)
        try:
            while not server.started:
                if finished.is_set():
                    raise ConfigError("the gateway stopped while starting", hint="see the log lines above")
                await anyio.sleep(STARTUP_POLL_S)
            await announce()
            await finished.wait()
        finally:
            server.should_exit = True
            if metrics_server is not None:
                metrics_server[0].should_exit = True
            watcher.cancel()


def _metrics_server(pincer: Pincer, gateway: Gateway) -> tuple[uvicorn.Server, socket.socket] | None:
    """``/metrics`` on ``[telemetry] metrics_port``: 127.0.0.1 only, no token, the guard's Host
    and Origin checks (a page that rebinds a name to 127.0.0.1 cannot read it)."""
    port = pincer.config.telemetry.metrics_port
    if port is None or pincer.metrics is None or gateway.tokens is None:
        return None
    from pincer.gateway.guard import Guard
    from pincer.gateway.probes import metrics_app

    app = Guard(
        metrics_app(pincer.metrics), tokens=gateway.tokens, max_body_bytes=1_024, bound_host=METRICS_HOST,
        allowed_hosts=(), allowed_origins=(), public_paths=("/metrics",),
    )  # fmt: skip
    sock = _bind(METRICS_HOST, port, "pick another [telemetry] metrics_port, or leave it unset")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False, proxy_headers=False)
    return uvicorn.Server(config), sock


async def _run_metrics(server: uvicorn.Server, sock: socket.socket) -> None:
    with anyio.CancelScope(shield=True):  # stopped by should_exit with the gateway, not torn down
        await server.serve(sockets=[sock])
