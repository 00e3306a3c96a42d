"""``/ui/tools``: the tools the signed-in session may see (the one rule of
``policy/visibility.py``, as ``GET /api/v1/tools``), each with runtime, effects, schema and the
grants that apply to it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import PincerError
from pincer.gateway.ui.auth import require_identity
from pincer.gateway.ui.render import pages_of, pincer_of
from pincer.policy.grants import grant_applies_to, grant_matches
from pincer.policy.visibility import visible_tool, visible_tools
from pincer.service import Pincer

__all__ = ["routes"]


def _grants_for(pincer: Pincer, tool: str, session: str, kind: str) -> list[dict[str, object]]:
    grants = (*pincer.config.grants, *pincer.grants.all())
    return [g.to_dict() for g in grants if grant_matches(g, tool) and grant_applies_to(g, session, kind)]


async def page(request: Request) -> Response:
    identity = require_identity(request)
    pincer = pincer_of(request)
    specs = visible_tools(pincer.config.session(identity.name), pincer.registry.list())
    kind = identity.session.kind.value
    tools = [
        {"spec": s, "grants": len(_grants_for(pincer, s.name, identity.name, kind))}
        for s in sorted(specs, key=lambda s: s.name)
    ]
    return pages_of(request).render(request, "tools.html", {"tools": tools})


async def detail(request: Request) -> Response:
    identity = require_identity(request)
    pincer = pincer_of(request)
    name = request.path_params["name"]
    try:
        spec = visible_tool(pincer.config.session(identity.name), pincer.registry.get, name)
    except PincerError as exc:
        return pages_of(request).render(
            request, "tool.html", {"spec": None, "name": name, "error": exc.message}, status=404
        )
    pages = pages_of(request)
    grants = _grants_for(pincer, spec.name, identity.name, identity.session.kind.value)
    context = {
        "spec": spec, "name": name, "error": None, "schema": honest_json(pages.redact(spec.input_schema), indent=2),
        "grants": [honest_json(pages.redact(g), indent=2) for g in grants],
    }  # fmt: skip
    return pages.render(request, "tool.html", context)


def routes() -> list[Route]:
    return [Route("/tools", page, methods=["GET"]), Route("/tools/{name:str}", detail, methods=["GET"])]
