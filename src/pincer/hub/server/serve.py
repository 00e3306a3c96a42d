"""``pincer hub serve``: the hub app under uvicorn on its own port, loopback by default."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from pincer.core.errors import ConfigError, UsageError
from pincer.hub.archive import ArchiveLimits
from pincer.hub.server.app import HubLimits, create_hub_app
from pincer.hub.server.store import HubStore

__all__ = ["HubServeInfo", "serve_hub", "SHUTDOWN_GRACE_S", "STARTUP_POLL_S"]

SHUTDOWN_GRACE_S = 3
STARTUP_POLL_S = 0.01
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True, kw_only=True, slots=True)
class HubServeInfo:
    host: str
    port: int
    url: str
    home: str

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "api_url": f"{self.url}/api/v1", "openapi_url": f"{self.url}/api/v1/openapi.json",
                "host": self.host, "port": self.port, "home": self.home}  # fmt: skip


async def serve_hub(
    home: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    allow_remote: bool = False,
    limits: HubLimits | None = None,
    archive_limits: ArchiveLimits | None = None,
    on_ready: Callable[[HubServeInfo], None] | None = None,
) -> None:
    """Serve until cancelled. A non-loopback ``host`` needs ``allow_remote`` (``--allow-remote``)."""
    if host not in _LOOPBACK and not allow_remote:
        raise UsageError(
            f"refusing to listen on {host}: the hub server is loopback-only by default",
            hint="use 127.0.0.1, or pass --allow-remote (and put TLS in front of it)",
        )
    store = HubStore(home, limits=archive_limits)
    app = create_hub_app(store, limits=limits)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        store.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="pick another port with --port (0 picks one)") from exc
    bound = sock.getsockname()[1]
    server = uvicorn.Server(
        # proxy_headers off: uvicorn would take X-Forwarded-For from any loopback client as the
        # client's address, and the per-address rate limit and stars are keyed on it.
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                       server_header=False, proxy_headers=False)
    )
    shown = f"[{host}]" if ":" in host else host
    info = HubServeInfo(host=host, port=bound, url=f"http://{shown}:{bound}", home=str(home))
    finished = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=[sock])
        finally:
            finished.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                while not server.started:
                    if finished.is_set():
                        raise ConfigError("the hub server stopped while starting", hint="see the log lines above")
                    await anyio.sleep(STARTUP_POLL_S)
                if on_ready is not None:
                    on_ready(info)
                await finished.wait()
            finally:
                server.should_exit = True
    finally:
        store.close()
