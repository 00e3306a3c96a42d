"""What load balancers, Kubernetes and Prometheus read: ``/healthz``, ``/readyz``, ``/metrics``.

- ``GET /healthz``: the process is alive and serving (200), with pincer's version and the names
  of settings that wait for a restart; no token.
- ``GET /readyz``: the gateway can take calls: the store answers at this pincer's schema, Redis
  answers when ``[cache] url`` names it, the audit writer keeps up (store/readiness.py). 200 or
  503, with one word per check; no token, and nothing a caller could not know already: no URL,
  no host, no driver message.
- ``GET /metrics``: Prometheus metrics (telemetry/metrics.py) for a main session's token, or on
  ``[telemetry] metrics_port`` (127.0.0.1 only) without one.

The guard's Host and Origin checks stay in front of all three (a probe sends ``Host: localhost``
or a name in ``[gateway] allowed_hosts``; docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pincer import __version__
from pincer.gateway.guard import SESSION_SCOPE_KEY

if TYPE_CHECKING:
    from pincer.telemetry.metrics import Metrics

__all__ = ["ProbeServices", "probe_routes", "metrics_app"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeServices:
    """What the probes read of the service: the settings that wait for a restart, the stores'
    readiness, and the metrics (None while ``[telemetry] metrics`` is off)."""

    restart_needed: Callable[[], tuple[str, ...]]
    readiness: Callable[[], Awaitable[dict[str, str]]]
    metrics: Metrics | None


def probe_routes(services: ProbeServices) -> list[Route]:
    async def healthz(request: Request) -> JSONResponse:
        # restart_needed: names of settings (never values) that wait for a restart; `pincer doctor` reads it
        return JSONResponse({"status": "ok", "version": __version__, "restart_needed": list(services.restart_needed())})

    async def readyz(request: Request) -> JSONResponse:
        checks = await services.readiness()
        ready = all(state == "ok" for state in checks.values())
        return JSONResponse({"status": "ready" if ready else "not_ready", "checks": checks}, status_code=200 if ready else 503)

    routes = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]
    if services.metrics is not None:
        kept = services.metrics

        async def metrics(request: Request) -> Response:
            session = request.scope.get(SESSION_SCOPE_KEY)
            if session is None or not session.is_main:
                name = getattr(session, "name", "")
                return JSONResponse(
                    {"error": {"code": "session_forbidden", "message": f"session {name!r} may not read the gateway's metrics",
                               "hint": "scrape with a main session's token, or set [telemetry] metrics_port"}},
                    status_code=403,
                )  # fmt: skip
            return _exposition(kept, request)

        routes.append(Route("/metrics", metrics, methods=["GET"]))
    return routes


def metrics_app(metrics: Metrics) -> Starlette:
    """``/metrics`` alone, for ``[telemetry] metrics_port`` (behind a guard that checks Host)."""

    async def exposition(request: Request) -> Response:
        return _exposition(metrics, request)

    return Starlette(routes=[Route("/metrics", exposition, methods=["GET"])])


def _exposition(metrics: Metrics, request: Request) -> Response:
    body, content_type = metrics.exposition(request.headers.get("accept"))
    return Response(body, media_type=content_type)
