"""OpenAPI operations as tool definitions: one tool per operation, one JSON Schema per tool.

Path, query, header and cookie parameters become top-level properties under their own names (a
name used in two places is prefixed with the place: ``query_id``); the request body becomes the
``body`` property (:mod:`.bodies` says which media type and how). Headers the spec says to ignore
(Accept, Content-Type, Authorization) and the parameters an operation's security scheme fills
(an API key in a header, query or cookie) are left out. ``readOnly`` properties are left out of
what a caller sends; ``writeOnly`` ones are taken out of what the API answers. Each
:class:`Operation` records how every property goes back into the request (``style``,
``explode``, ``allowReserved``: :mod:`.serialize`), so the runtime needs nothing but the stored
operations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urljoin

from pincer.core.errors import ManifestError
from pincer.core.schema import schema_problem
from pincer.runtimes.openapi.bodies import (
    FILE_SCHEMA,
    PartEncoding,
    RequestBody,
    choose_media,
    is_binary_schema,
    media_kind,
)
from pincer.runtimes.openapi.document import Location, Resolver
from pincer.runtimes.openapi.security import Requirement, SecurityScheme, read_requirements
from pincer.runtimes.openapi.serialize import DEFAULT_STYLE, check_style

__all__ = ["Parameter", "Operation", "extract_operations", "server_urls", "operation_name", "MAX_OPERATIONS"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_OPERATIONS = 5_000
MAX_DESCRIPTION_CHARS = 2_000
MAX_PROPERTY_CHARS = 64  # function-calling APIs' limit on a property name
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})  # 3.x: SHALL be ignored
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_NOT_PROP = re.compile(r"[^A-Za-z0-9_.-]")
_LOCATIONS = ("path", "query", "header", "cookie")


@dataclass(frozen=True, kw_only=True, slots=True)
class Parameter:
    prop: str  # the property in the tool's input schema
    name: str  # the name on the wire
    location: str  # path | query | header | cookie
    required: bool = False
    style: str = ""  # "" means the location's default (simple for path and header, form otherwise)
    explode: bool = True
    allow_reserved: bool = False
    content_type: str | None = None  # a parameter given by `content`: its value is sent as this type

    @property
    def wire_style(self) -> str:
        return self.style or DEFAULT_STYLE[self.location]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"prop": self.prop, "name": self.name, "in": self.location, "required": self.required,
                                "style": self.wire_style, "explode": self.explode}
        if self.allow_reserved:
            data["allow_reserved"] = True
        if self.content_type:
            data["content_type"] = self.content_type
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Parameter:
        return cls(prop=data["prop"], name=data["name"], location=data["in"], required=bool(data.get("required")),
                   style=data.get("style") or "", explode=bool(data.get("explode", True)),
                   allow_reserved=bool(data.get("allow_reserved")), content_type=data.get("content_type"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Operation:
    name: str  # the operation's tool-name part (operationId, else method + path)
    method: str  # upper case
    path: str  # the template, e.g. /pets/{petId}
    description: str
    input_schema: Mapping[str, Any]
    parameters: tuple[Parameter, ...] = ()
    body: RequestBody | None = None
    deprecated: bool = False
    # Alternatives of schemes (``security``, the operation's or the document's); () is anonymous.
    # None: the document declares none for it (then only --auth sends a credential).
    security: tuple[Requirement, ...] | None = None
    accept: str = "application/json"
    write_only: Mapping[str, Any] | None = None  # what to take out of a JSON answer (_prune_tree)
    server: str | None = None  # the operation's (or its path item's) own server URL, if it names one

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "parameters": [p.to_json() for p in self.parameters],
        }
        if self.body is not None:
            data["body"] = self.body.to_json()
        if self.deprecated:
            data["deprecated"] = True
        if self.security is not None:
            data["security"] = [{k: list(v) for k, v in alt.items()} for alt in self.security]
        if self.accept != "application/json":
            data["accept"] = self.accept
        if self.write_only:
            data["write_only"] = dict(self.write_only)
        if self.server:
            data["server"] = self.server
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Operation:
        body = None
        if isinstance(data.get("body"), Mapping):
            body = RequestBody.from_json(data["body"])
        elif data.get("body_type"):  # stored by pincer before the body had its own record
            body = RequestBody(media_type=data["body_type"], kind=media_kind(data["body_type"]),
                               required=bool(data.get("body_required")))
        security = data.get("security")
        return cls(
            name=data["name"],
            method=data["method"],
            path=data["path"],
            description=data.get("description", ""),
            input_schema=data["input_schema"],
            parameters=tuple(Parameter.from_json(p) for p in data.get("parameters", [])),
            body=body,
            deprecated=bool(data.get("deprecated")),
            security=None if security is None else tuple({k: tuple(v) for k, v in alt.items()} for alt in security),
            accept=data.get("accept") or "application/json",
            write_only=data.get("write_only"),
            server=data.get("server"),
        )


def operation_name(method: str, path: str, operation_id: Any) -> str:
    raw = operation_id if isinstance(operation_id, str) and operation_id.strip() else f"{method} {path}"
    return _NOT_NAME.sub("_", raw).strip("_") or method


def server_urls(document: Mapping[str, Any], location: Location) -> list[str]:
    """The document's server URLs (or a path item's or operation's, given as ``document``),
    made absolute against the URL it was fetched from, with server variables replaced by their
    defaults."""
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


class _Props:
    """Property names of one tool's input: usable by function-calling APIs, never shared."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def claim(self, wanted: str) -> str:
        base = (_NOT_PROP.sub("_", wanted) or "_")[:MAX_PROPERTY_CHARS]
        name, n = base, 2
        while name in self.used:
            suffix = f"_{n}"
            name, n = base[: MAX_PROPERTY_CHARS - len(suffix)] + suffix, n + 1
        self.used.add(name)
        return name


def _injected_params(security: Sequence[Requirement], schemes: Mapping[str, SecurityScheme]) -> set[tuple[str, str]]:
    """(in, name) of the parameters an operation's API-key schemes fill."""
    found = set()
    for alternative in security:
        for key in alternative:
            scheme = schemes.get(key)
            if scheme is not None and scheme.type == "apiKey" and scheme.location and scheme.param:
                name = scheme.param.lower() if scheme.location == "header" else scheme.param
                found.add((scheme.location, name))
    return found


def _param_key(location: str, name: str) -> tuple[str, str]:
    return location, name.lower() if location == "header" else name


def _build_parameter(resolver: Resolver, param: Mapping[str, Any], base: Location, prop: str,
                     where: str) -> tuple[Parameter, Any]:
    location = str(param.get("in"))
    style = param.get("style", DEFAULT_STYLE[location])
    problem = check_style(location, style) if isinstance(style, str) else "style must be a string"
    if problem is not None:
        raise ManifestError(f"parameter {param['name']!r}: {problem}", source=str(base), key=where)
    content_type = None
    if "schema" in param:
        schema = resolver.schema(param["schema"], base)
    elif isinstance(param.get("content"), Mapping) and param["content"]:
        content_type, media = next(iter(param["content"].items()))
        schema = resolver.schema(media.get("schema"), base) if isinstance(media, Mapping) else {}
    else:
        schema = {"type": "string"}
    if isinstance(schema, Mapping) and isinstance(param.get("description"), str) and "description" not in schema:
        schema = {**schema, "description": param["description"]}
    explode = param.get("explode", style == "form")
    parameter = Parameter(
        prop=prop, name=param["name"], location=location, required=bool(param.get("required")) or location == "path",
        style=style, explode=explode is not False, allow_reserved=param.get("allowReserved") is True and location == "query",
        content_type=str(content_type) if content_type else None,
    )
    return parameter, schema


def _object_view(resolver: Resolver, schema: Any, base: Location) -> tuple[Mapping[str, Any], Location] | None:
    """The object schema a form or multipart body names (its ``$ref`` chain followed), or None."""
    target, target_base = resolver.deref(schema, base)
    if isinstance(target, Mapping) and isinstance(target.get("properties"), Mapping):
        return target, target_base
    return None


def _body(resolver: Resolver, op: Mapping[str, Any], base: Location, where: str) -> tuple[RequestBody, Any] | None:
    raw, body_base = resolver.deref(op["requestBody"], base)
    content = raw.get("content") if isinstance(raw, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return None
    chosen = choose_media(content)
    if chosen is None:
        return None
    media_type, kind = chosen
    media = content[media_type] if isinstance(content[media_type], Mapping) else {}
    raw_schema = media.get("schema")
    required = bool(raw.get("required"))
    encoding: dict[str, PartEncoding] = {}
    files: dict[str, bool] = {}
    if kind == "binary":
        schema: Any = dict(FILE_SCHEMA)
    elif kind == "text":
        converted = resolver.schema(raw_schema, body_base)
        schema = converted if isinstance(converted, Mapping) and converted.get("type") == "string" else {"type": "string"}
    elif kind in ("form", "multipart") and (view := _object_view(resolver, raw_schema, body_base)) is not None:
        target, target_base = view
        raw_encoding = media.get("encoding")
        for prop, enc in raw_encoding.items() if isinstance(raw_encoding, Mapping) else ():
            if isinstance(enc, Mapping):
                encoding[str(prop)] = PartEncoding(
                    content_type=enc.get("contentType") if isinstance(enc.get("contentType"), str) else None,
                    style=enc.get("style") if enc.get("style") in ("form", "spaceDelimited", "pipeDelimited", "deepObject") else None,
                    explode=enc.get("explode") if isinstance(enc.get("explode"), bool) else None,
                    allow_reserved=enc.get("allowReserved") is True,
                )
        properties: dict[str, Any] = {}
        for prop, prop_schema in target["properties"].items():
            resolved, _ = resolver.deref(prop_schema, target_base)
            if resolver.for_request and isinstance(resolved, Mapping) and resolved.get("readOnly") is True:
                continue
            items, _ = resolver.deref(resolved.get("items"), target_base) if isinstance(resolved, Mapping) else (None, None)
            if kind == "multipart" and is_binary_schema(resolved):
                files[str(prop)] = False
                properties[str(prop)] = dict(FILE_SCHEMA)
            elif kind == "multipart" and isinstance(resolved, Mapping) and resolved.get("type") == "array" and is_binary_schema(items):
                files[str(prop)] = True
                properties[str(prop)] = {"type": "array", "items": dict(FILE_SCHEMA)}
            else:
                properties[str(prop)] = resolver.schema(prop_schema, target_base)
        schema = {"type": "object", "properties": properties}
        wanted = target.get("required")
        if isinstance(wanted, list) and (kept := [r for r in wanted if r in properties]):
            schema["required"] = kept
        if target.get("additionalProperties") is False:
            schema["additionalProperties"] = False
        if isinstance(target.get("description"), str):
            schema["description"] = target["description"]
    else:
        schema = resolver.schema(raw_schema, body_base)
    if isinstance(raw.get("description"), str) and isinstance(schema, dict):
        schema.setdefault("description", raw["description"])
    return RequestBody(media_type=media_type, kind=kind, required=required, encoding=encoding, files=files), schema


def _success_media(op: Mapping[str, Any], resolver: Resolver, base: Location) -> tuple[list[str], Any, Location]:
    """The media types of the first 2xx (else default) answer, and its JSON schema if any."""
    responses = op.get("responses")
    if not isinstance(responses, Mapping):
        return [], None, base
    codes = sorted(str(c) for c in responses if str(c)[:1] == "2") or (["default"] if "default" in responses else [])
    for code in codes:
        raw = responses.get(code)
        if raw is None:
            raw = responses.get(int(code)) if code.isdigit() else None
        response, response_base = resolver.deref(raw, base)
        content = response.get("content") if isinstance(response, Mapping) else None
        if not isinstance(content, Mapping) or not content:
            continue
        types = [str(t) for t in content]
        json_type = next((t for t in types if media_kind(t) == "json"), None)
        media = content.get(json_type) if json_type else None
        schema = media.get("schema") if isinstance(media, Mapping) else None
        return types, schema, response_base
    return [], None, base


def _accept(types: list[str]) -> str:
    if not types:
        return "application/json"
    ordered = sorted(dict.fromkeys(types), key=lambda t: media_kind(t) != "json")
    return ", ".join(ordered[:8])


def _prune_tree(resolver: Resolver, schema: Any, base: Location, memo: dict[int, Any], active: set[int]) -> Any:
    """What of a JSON answer is ``writeOnly``: ``{"drop": [...], "properties": {name: tree},
    "items": tree, "additionalProperties": tree}``, or None when nothing is."""
    try:
        target, target_base = resolver.deref(schema, base)
    except ManifestError:
        return None
    if not isinstance(target, Mapping):
        return None
    key = id(target)
    if key in memo:
        return memo[key]
    if key in active:  # recursion: the outer walk covers it
        return None
    active.add(key)
    drop: list[str] = []
    props: dict[str, Any] = {}
    tree: dict[str, Any] = {}
    properties = target.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            resolved, _ = resolver.deref(sub, target_base)
            if isinstance(resolved, Mapping) and resolved.get("writeOnly") is True:
                drop.append(str(name))
            elif (subtree := _prune_tree(resolver, sub, target_base, memo, active)) is not None:
                props[str(name)] = subtree
    for keyword in ("items", "additionalProperties"):
        if isinstance(target.get(keyword), Mapping) and (sub := _prune_tree(resolver, target[keyword], target_base, memo, active)):
            tree[keyword] = sub
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in target.get(keyword) or () if isinstance(target.get(keyword), list) else ():
            sub = _prune_tree(resolver, branch, target_base, memo, active)
            if sub:
                drop.extend(sub.get("drop", ()))
                props.update(sub.get("properties", {}))
                for nested in ("items", "additionalProperties"):
                    if nested in sub:
                        tree.setdefault(nested, sub[nested])
    active.discard(key)
    if drop:
        tree["drop"] = sorted(set(drop))
    if props:
        tree["properties"] = props
    memo[key] = tree or None
    return memo[key]


def _security(op: Mapping[str, Any], root: Mapping[str, Any], schemes: Mapping[str, SecurityScheme],
              source: str, where: str, notes: list[str]) -> tuple[Requirement, ...] | None:
    """The operation's ``security``, else the document's; None when neither declares one."""
    if "security" not in op and root.get("security") is None:
        return None
    raw = op["security"] if "security" in op else root.get("security")
    security = read_requirements(raw, source=source, where=f"{where}.security" if "security" in op else "security")
    for alternative in security:
        for key in alternative:
            if key not in schemes:
                notes.append(f"{where}: security names {key!r}, which components.securitySchemes does not declare")
    return security


def _build_operation(
    resolver: Resolver,
    method: str,
    path: str,
    path_item: Mapping[str, Any],
    op: Mapping[str, Any],
    base: Location,
    credential: tuple[str, str] | None,
    schemes: Mapping[str, SecurityScheme],
    notes: list[str],
) -> Operation:
    where = f"paths.{path}.{method}"
    security = _security(op, resolver.root, schemes, str(resolver.location), where, notes)
    injected = _injected_params(security or (), schemes)
    if credential is not None:
        injected.add(_param_key(*credential))
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Parameter] = []
    raw_params = []
    for param, param_base in _parameters(resolver, path_item, op, base, where):
        location = param.get("in")
        if location not in _LOCATIONS:
            raise ManifestError(f"parameter {param['name']!r}: 'in' must be one of {', '.join(_LOCATIONS)}, "
                                f"not {location!r}", source=str(base), key=where)
        if location == "header" and param["name"].lower() in _IGNORED_HEADERS:
            continue
        if _param_key(location, param["name"]) in injected:
            continue  # pincer fills it from the secret store; no caller supplies it
        raw_params.append((param, param_base))
    names = [p["name"] for p, _ in raw_params]
    has_body = "requestBody" in op
    props = _Props()
    if has_body:
        props.used.add("body")
    for param, param_base in raw_params:
        location = param["in"]
        wanted = param["name"] if names.count(param["name"]) == 1 and not (has_body and param["name"] == "body") \
            else f"{location}_{param['name']}"
        parameter, schema = _build_parameter(resolver, param, param_base, props.claim(wanted), where)
        properties[parameter.prop] = schema
        if parameter.required:
            required.append(parameter.prop)
        params.append(parameter)
    body = None
    if has_body and (found := _body(resolver, op, base, where)) is not None:
        body, schema = found
        properties["body"] = schema
        if body.required:
            required.append("body")
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    types, answer_schema, answer_base = _success_media(op, resolver, base)
    write_only = None
    if answer_schema is not None:
        write_only = _prune_tree(resolver, answer_schema, answer_base, resolver.memo, set())
    # 3.x: an operation's servers override its path item's, which override the document's.
    own = next(iter(server_urls(op, resolver.location) or server_urls(path_item, resolver.location)), None)
    return Operation(
        name=operation_name(method, path, op.get("operationId")),
        method=method.upper(),
        path=path,
        description=_description(op) or f"{method.upper()} {path}",
        input_schema=schema,
        parameters=tuple(params),
        body=body,
        deprecated=bool(op.get("deprecated")),
        security=security,
        accept=_accept(types),
        write_only=write_only,
        server=own,
    )


def extract_operations(
    resolver: Resolver,
    *,
    credential: tuple[str, str] | None = None,
    schemes: Sequence[SecurityScheme] = (),
    notes: list[str] | None = None,
) -> list[Operation]:
    """Every operation of the document, each with its own ``$defs`` (only the ones it uses).
    ``credential`` (``("header", "x-api-key")`` or ``("query", "key")``) is a parameter pincer
    injects itself for every operation (``--auth``); ``schemes`` are the document's security
    schemes (their API-key parameters are left out where an operation uses them). What is odd
    but not fatal about the document is appended to ``notes``."""
    notes = notes if notes is not None else []
    by_key = {s.key: s for s in schemes}
    paths = resolver.root.get("paths") or {}
    if not isinstance(paths, Mapping):
        raise ManifestError("'paths' must be an object", source=str(resolver.location), key="paths")
    found: list[tuple[str, Operation]] = []
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
            if len(found) >= MAX_OPERATIONS:
                raise ManifestError(f"more than {MAX_OPERATIONS} operations", source=str(resolver.location),
                                    hint="split the document and add each part as its own service")
            resolver.reset_defs()
            operation = _build_operation(resolver, method, path, item, op, item_base, credential, by_key, notes)
            notes.extend(f"paths.{path}.{method}: {what}" for what in dict.fromkeys(resolver.dropped))
            resolver.dropped.clear()
            if resolver.defs:
                operation = replace(operation, input_schema={**operation.input_schema, "$defs": dict(resolver.defs)})
            problem = schema_problem(operation.input_schema)
            if problem is not None:  # a keyword holding junk (`required: null`): no tool could validate a call
                notes.append(f"paths.{path}.{method}: left out, its parameters and body are not a valid JSON Schema "
                             f"({problem})")
                continue
            found.append((operation.name, operation))
    # Two operations with one name (two ids that differ in punctuation, or none and one path):
    # the later ones get the first free ``_2``, ``_3``... that no other operation uses.
    taken = {name for name, _ in found}
    seen: set[str] = set()
    operations = []
    for name, operation in found:
        if name in seen:
            n = 2
            while f"{name}_{n}" in taken:
                n += 1
            operation = replace(operation, name=f"{name}_{n}")
            taken.add(operation.name)
        seen.add(operation.name)
        operations.append(operation)
    return operations
