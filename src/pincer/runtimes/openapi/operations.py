"""OpenAPI operations as tool definitions: one tool per operation, one JSON Schema per tool.

Path, query and header parameters become top-level properties under their own names (a name
used in two places is prefixed with the place: ``query_id``); a JSON, form or text request body
becomes the ``body`` property. Cookie parameters and the headers pincer sets itself (Accept,
Content-Type, Authorization) are left out. Each :class:`Operation` records how every property
goes back into the request, so the runtime needs nothing but the stored operations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urljoin

from pincer.core.errors import ManifestError
from pincer.runtimes.openapi.document import Location, Resolver

__all__ = ["Parameter", "Operation", "extract_operations", "server_urls", "operation_name", "MAX_OPERATIONS"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_OPERATIONS = 2_000
MAX_DESCRIPTION_CHARS = 2_000
_SKIPPED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_BODY_TYPES = ("application/json", "application/x-www-form-urlencoded", "text/plain")


@dataclass(frozen=True, kw_only=True, slots=True)
class Parameter:
    prop: str  # the property in the tool's input schema
    name: str  # the name on the wire
    location: str  # path | query | header
    required: bool = False
    explode: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"prop": self.prop, "name": self.name, "in": self.location, "required": self.required,
                "explode": self.explode}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Parameter:
        return cls(prop=data["prop"], name=data["name"], location=data["in"], required=bool(data.get("required")),
                   explode=bool(data.get("explode", True)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Operation:
    name: str  # the operation's tool-name part (operationId, else method + path)
    method: str  # upper case
    path: str  # the template, e.g. /pets/{petId}
    description: str
    input_schema: Mapping[str, Any]
    parameters: tuple[Parameter, ...] = ()
    body_type: str | None = None  # content type of the body property, if any
    body_required: bool = False
    deprecated: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "parameters": [p.to_json() for p in self.parameters],
            "body_type": self.body_type,
            "body_required": self.body_required,
        }
        if self.deprecated:
            data["deprecated"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Operation:
        return cls(
            name=data["name"],
            method=data["method"],
            path=data["path"],
            description=data.get("description", ""),
            input_schema=data["input_schema"],
            parameters=tuple(Parameter.from_json(p) for p in data.get("parameters", [])),
            body_type=data.get("body_type"),
            body_required=bool(data.get("body_required")),
            deprecated=bool(data.get("deprecated")),
        )


def operation_name(method: str, path: str, operation_id: Any) -> str:
    raw = operation_id if isinstance(operation_id, str) and operation_id.strip() else f"{method} {path}"
    return _NOT_NAME.sub("_", raw).strip("_") or method


def server_urls(document: Mapping[str, Any], location: Location) -> list[str]:
    """The document's server URLs, made absolute against the URL it was fetched from, with
    server variables replaced by their defaults."""
    urls: list[str] = []
    servers = document.get("servers")
    for server in servers if isinstance(servers, list) else []:
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            continue
        url = server["url"]
        raw = server.get("variables")
        variables: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        for name, spec in variables.items():
            default = spec.get("default") if isinstance(spec, Mapping) else None
            if isinstance(default, str):
                url = url.replace("{" + str(name) + "}", default)
        if isinstance(location, str):
            url = urljoin(location, url)
        urls.append(url)
    return urls


def _description(op: Mapping[str, Any]) -> str:
    parts = [p.strip() for p in (op.get("summary"), op.get("description")) if isinstance(p, str) and p.strip()]
    text = "\n\n".join(dict.fromkeys(parts))
    return text[:MAX_DESCRIPTION_CHARS]


def _parameters(
    resolver: Resolver, path_item: Mapping[str, Any], op: Mapping[str, Any], base: Location, where: str
) -> list[tuple[Mapping[str, Any], Location]]:
    merged: dict[tuple[str, str], tuple[Mapping[str, Any], Location]] = {}
    for source in (path_item.get("parameters"), op.get("parameters")):
        if source is None:
            continue
        if not isinstance(source, list):
            raise ManifestError("parameters must be a list", source=str(base), key=where)
        for raw in source:
            param, param_base = resolver.deref(raw, base)
            if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
                raise ManifestError("a parameter has no name", source=str(base), key=where)
            merged[(param["name"], str(param.get("in")))] = (param, param_base)
    return list(merged.values())


def _build_operation(
    resolver: Resolver,
    method: str,
    path: str,
    path_item: Mapping[str, Any],
    op: Mapping[str, Any],
    base: Location,
    credential: tuple[str, str] | None,
) -> Operation:
    where = f"paths.{path}.{method}"
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Parameter] = []
    raw_params = _parameters(resolver, path_item, op, base, where)
    names = [p["name"] for p, _ in raw_params if p.get("in") in ("path", "query", "header")]
    for param, param_base in raw_params:
        location = param.get("in")
        if location not in ("path", "query", "header"):
            continue  # cookies are not sent by tools
        if location == "header" and param["name"].lower() in _SKIPPED_HEADERS:
            continue
        if credential is not None and (location, param["name"].lower()) == credential:
            continue  # pincer injects it from the secret store; no caller supplies it
        prop = param["name"] if names.count(param["name"]) == 1 else f"{location}_{param['name']}"
        prop = re.sub(r"[^A-Za-z0-9_.-]", "_", prop)
        if "schema" in param:
            schema = resolver.schema(param["schema"], param_base)
        elif isinstance(param.get("content"), Mapping) and param["content"]:
            media = next(iter(param["content"].values()))
            schema = resolver.schema(media.get("schema", {}), param_base) if isinstance(media, Mapping) else {}
        else:
            schema = {"type": "string"}
        if isinstance(schema, Mapping) and isinstance(param.get("description"), str) and "description" not in schema:
            schema = {**schema, "description": param["description"]}
        is_required = bool(param.get("required")) or location == "path"
        properties[prop] = schema
        if is_required:
            required.append(prop)
        params.append(
            Parameter(prop=prop, name=param["name"], location=location, required=is_required,
                      explode=param.get("explode", param.get("style", "form") == "form") is not False)
        )
    body_type = None
    body_required = False
    if "requestBody" in op:
        body, body_base = resolver.deref(op["requestBody"], base)
        content = body.get("content") if isinstance(body, Mapping) else None
        if isinstance(content, Mapping) and content:
            body_type = next((t for t in _BODY_TYPES if t in content), None)
            if body_type is None:
                body_type = next((t for t in content if str(t).endswith("+json")), None)
            if body_type is not None:
                media = content[body_type]
                schema = resolver.schema(media.get("schema", {}), body_base) if isinstance(media, Mapping) else {}
                prop = "body" if "body" not in properties else "request_body"
                if prop != "body":
                    raise ManifestError("a parameter named 'body' collides with the request body", source=str(base),
                                        key=where)
                if isinstance(body, Mapping) and isinstance(body.get("description"), str) and isinstance(schema, dict):
                    schema.setdefault("description", body["description"])
                properties["body"] = schema
                body_required = bool(body.get("required"))
                if body_required:
                    required.append("body")
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return Operation(
        name=operation_name(method, path, op.get("operationId")),
        method=method.upper(),
        path=path,
        description=_description(op) or f"{method.upper()} {path}",
        input_schema=schema,
        parameters=tuple(params),
        body_type=body_type,
        body_required=body_required,
        deprecated=bool(op.get("deprecated")),
    )


def extract_operations(resolver: Resolver, *, credential: tuple[str, str] | None = None) -> list[Operation]:
    """Every operation of the document, each with its own ``$defs`` (only the ones it uses).
    ``credential`` (``("header", "x-api-key")`` or ``("query", "key")``) is the parameter pincer
    injects itself, left out of every schema."""
    if credential is not None:
        credential = (credential[0], credential[1].lower())
    paths = resolver.root.get("paths") or {}
    if not isinstance(paths, Mapping):
        raise ManifestError("'paths' must be an object", source=str(resolver.location), key="paths")
    operations: list[Operation] = []
    seen: dict[str, int] = {}
    for path, raw_item in paths.items():
        if not isinstance(path, str) or not path.startswith("/"):
            raise ManifestError(f"path {path!r} must start with '/'", source=str(resolver.location), key="paths")
        item, item_base = resolver.deref(raw_item, resolver.location)
        if not isinstance(item, Mapping):
            raise ManifestError("a path item must be an object", source=str(resolver.location), key=f"paths.{path}")
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            if not isinstance(op, Mapping):
                raise ManifestError("an operation must be an object", source=str(item_base), key=f"paths.{path}.{method}")
            resolver.reset_defs()
            operation = _build_operation(resolver, method, path, item, op, item_base, credential)
            if resolver.defs:
                operation = replace(operation, input_schema={**operation.input_schema, "$defs": dict(resolver.defs)})
            count = seen.get(operation.name, 0) + 1
            seen[operation.name] = count
            if count > 1:
                operation = replace(operation, name=f"{operation.name}_{count}")
            operations.append(operation)
            if len(operations) > MAX_OPERATIONS:
                raise ManifestError(f"more than {MAX_OPERATIONS} operations", source=str(resolver.location))
    return operations
