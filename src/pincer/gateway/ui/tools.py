"""``/ui/tools``: the tools the signed-in session may see (the one rule of
``policy/visibility.py``, as ``GET /api/v1/tools``), each with runtime, effects, schema and the
grants that apply to it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import PincerError
from pincer.gateway.ui.auth import require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.policy.grants import grant_applies_to, grant_matches
from pincer.policy.visibility import visible_tool, visible_tools

__all__ = ["routes"]


def _summary(description: str) -> str:
    first = description.strip().split("\n", 1)[0]
    return first if len(first) <= 160 else first[:157] + "..."


def _type_of(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if isinstance(kind, str):
        if kind == "array" and isinstance(prop.get("items"), Mapping):
            return f"array of {_type_of(prop['items'])}"
        return kind
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list):
            return " or ".join(_type_of(o) for o in options if isinstance(o, Mapping)) or "any"
    if "enum" in prop or "const" in prop:
        return "choice"
    return "any"


def _default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parameters(schema: Any) -> list[dict[str, Any]]:
    """The top-level parameters of an input schema, as the tool page lists them (the way a form
    built from the schema would: name, type, required, description, choices, default)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return []
    required = set(schema.get("required") or ())
    rows = []
    for name, prop in schema["properties"].items():
        prop = prop if isinstance(prop, Mapping) else {}
        choices = prop.get("enum") if isinstance(prop.get("enum"), list) else None
        rows.append({
            "name": name, "type": _type_of(prop), "required": name in required,
            "description": str(prop.get("description", "") or prop.get("title", "")),
            "choices": [str(c) for c in choices] if choices else None,
            "default": _default(prop["default"]) if "default" in prop else None,
        })  # fmt: skip
    return sorted(rows, key=lambda r: (not r["required"], r["name"]))


async def _grants_for(services: DashboardServices, tool: str, session: str, kind: str) -> list[dict[str, object]]:
    grants = (*services.config().grants, *await services.grants.all())
    return [g.to_dict() for g in grants if grant_matches(g, tool) and grant_applies_to(g, session, kind)]


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    specs = visible_tools(services.config().session(identity.name), services.registry.list())
    kind = identity.session.kind.value
    tools = [
        {"spec": s, "grants": len(await _grants_for(services, s.name, identity.name, kind)), "summary": _summary(s.description)}
        for s in sorted(specs, key=lambda s: s.name)
    ]
    return pages_of(request).render(request, "tools.html", {"tools": tools})


async def detail(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    name = request.path_params["name"]
    try:
        spec = visible_tool(services.config().session(identity.name), services.registry.get, name)
    except PincerError as exc:
        return pages_of(request).render(
            request, "tool.html", {"spec": None, "name": name, "error": exc.message}, status=404
        )
    pages = pages_of(request)
    grants = await _grants_for(services, spec.name, identity.name, identity.session.kind.value)
    schema = pages.redact(spec.input_schema)
    context = {
        "spec": spec, "name": name, "error": None, "schema": honest_json(schema, indent=2),
        "params": parameters(schema), "grants": [pages.redact(g) for g in grants],
    }  # fmt: skip
    return pages.render(request, "tool.html", context)


def routes() -> list[Route]:
    return [Route("/tools", page, methods=["GET"]), Route("/tools/{name:str}", detail, methods=["GET"])]
