"""``/ui/mcp``: MCP servers with their state and pinned tool definitions; a tool whose server now
offers something else than was trusted is blocked (``runtimes/mcp/pins.py``) and shown here
with the difference, and "Trust changed definition" pins it as it is now: an audit record of
effect ``modify_extension``, main sessions only (an agent must not trust what it calls)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.gateway.access import OPERATE_FORBIDDEN_HINT, may_operate
from pincer.gateway.ui.auth import UI_PREFIX, UiIdentity, read_form, require_csrf, require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import services_of
from pincer.runtimes.mcp.pins import describe_change
from pincer.store.acts import trusted_definition

__all__ = ["routes"]


def _servers(request: Request) -> list[dict[str, Any]]:
    services, pages = services_of(request), pages_of(request)
    runtime = services.upstream()
    if runtime is None:
        return []
    statuses = {s.name: s for s in runtime.statuses()}
    shown = []
    for name in sorted(runtime.servers):
        assignment = runtime.assignment(name)
        changes = [
            {"tool": c.definition.name, "change": c.change.replace("_", " "),
             "diff": describe_change(c.pinned, c.definition) if c.pinned is not None else "",
             "definition": honest_json(pages.redact(c.definition.public_json()), indent=2)}
            for c in assignment.candidates if c.change != "new"
        ]  # fmt: skip
        pins = runtime.pins.pins(name)
        status = statuses.get(name)
        shown.append({
            "name": name, "state": status.state if status else "idle", "error": status.last_error if status else None,
            "pins": [{"upstream": upstream, "registry_name": pin.registry_name,
                      "definition": honest_json(pages.redact(pin.definition.public_json()), indent=2)}
                     for upstream, pin in sorted(pins.items())],
            "changes": changes, "refused": [{"tool": r.tool, "reason": r.reason} for r in assignment.refused],
        })  # fmt: skip
    return shown


def _page(request: Request, identity: UiIdentity, *, status: int = 200, **extra: Any) -> Response:
    context = {"servers": _servers(request), "can_trust": may_operate(identity.session), "error": None,
               "notice": None, **extra}  # fmt: skip
    return pages_of(request).render(request, "mcp.html", context, status=status)


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    if not identity.is_main:
        return _page(request, identity, status=403, error="MCP servers are shown to main sessions only")
    trusted = request.query_params.get("trusted")
    return _page(request, identity, notice=f"trusted {trusted} as it is now" if trusted else None)


async def trust(request: Request) -> Response:
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    if not may_operate(identity.session):
        return _page(request, identity, status=403, error=f"{identity.actor} may not trust tool definitions: {OPERATE_FORBIDDEN_HINT}")
    services = services_of(request)
    runtime = services.upstream()
    server = request.path_params["server"]
    tool = form.get("tool", "")
    if runtime is None or server not in runtime.servers:
        return _page(request, identity, status=404, error=f"no MCP server {server!r}")
    candidate = next((c for c in runtime.assignment(server).candidates if c.definition.name == tool), None)
    if candidate is None:
        return _page(request, identity, status=409, error=f"{server}/{tool} has no changed definition to trust now")
    runtime.trust(server, [candidate.definition])
    await services.audit.append(
        trusted_definition(identity.actor, server=server, tool=tool, change=candidate.change,
                           definition_hash=candidate.definition.hash)
    )  # fmt: skip
    return RedirectResponse(f"{UI_PREFIX}/mcp?trusted={server}/{tool}", status_code=303)


def routes() -> list[Route]:
    return [Route("/mcp", page, methods=["GET"]), Route("/mcp/{server:str}/trust", trust, methods=["POST"])]
