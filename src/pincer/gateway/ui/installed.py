"""``/ui/installed``: what the hub installed here (``pincer.lock``), each with its version,
source, signer (or UNSIGNED), the lock's state on disk and the install scanner's findings; and
"Verify", the check ``pincer verify`` makes (files against the lock, signatures against the
trust store). Main sessions only: it describes the whole home, not one session's things."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.errors import PincerError
from pincer.gateway.ui.auth import UiIdentity, read_form, require_csrf, require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of

__all__ = ["routes"]


def _hub(services: DashboardServices) -> Any:
    from pincer.hub.catalog import Catalog
    from pincer.hub.installer import Hub

    return Hub(services.home, catalog=Catalog.from_config(services.config()))


def _rows(services: DashboardServices) -> list[dict[str, Any]]:
    from pincer.hub.integrity import version_dir_of
    from pincer.hub.layout import read_meta

    hub = _hub(services)
    rows = []
    for row in hub.installed():
        entry = next((e for e in hub.lock().entries if str(e.key) == row["key"]), None)
        stored = version_dir_of(services.home, entry) if entry is not None else None
        meta = read_meta(stored) if stored is not None else {}
        findings = meta.get("findings") if isinstance(meta, dict) else None
        rows.append({**row, "findings": findings if isinstance(findings, list) else []})
    return rows


async def _page(request: Request, identity: UiIdentity, *, verify: dict[str, Any] | None = None) -> Response:
    services = services_of(request)
    if not identity.is_main:
        context: dict[str, Any] = {"rows": [], "error": "installed artifacts are shown to main sessions only", "verify": None}
        return pages_of(request).render(request, "installed.html", context, status=403)
    try:
        rows = await anyio.to_thread.run_sync(_rows, services)  # reads and hashes files
        error = None
    except PincerError as exc:
        rows, error = [], exc.message
    context = {"rows": rows, "error": error, "verify": verify}
    status = 409 if verify is not None and not verify["ok"] else 200
    return pages_of(request).render(request, "installed.html", context, status=status)


async def page(request: Request) -> Response:
    return await _page(request, await require_identity(request))


async def verify(request: Request) -> Response:
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    if not identity.is_main:
        return await _page(request, identity)
    services = services_of(request)
    try:
        entries, problems = await anyio.to_thread.run_sync(lambda: _hub(services).verify())
        result = {"ok": not problems, "checked": len(entries), "mismatches": [m.reason for m in problems]}
    except PincerError as exc:
        result = {"ok": False, "checked": 0, "mismatches": [exc.message]}
    return await _page(request, identity, verify=result)


def routes() -> list[Route]:
    return [Route("/installed", page, methods=["GET"]), Route("/installed/verify", verify, methods=["POST"])]
