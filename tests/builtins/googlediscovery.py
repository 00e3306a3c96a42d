"""Google's own API descriptions as a request and response checker: the discovery documents that
``google-api-python-client`` ships (``googleapiclient/discovery_cache/documents/*.json``). Only
the JSON is read; the client library is never imported.

:func:`validate_request` finds the method a request names (path template and HTTP method, the
upload path of a method with ``mediaUpload``), then checks its path and query parameters (known,
typed, enums, required) and its JSON body against the method's request schema; :func:`validate_response`
checks an answer against the response schema. Objects are strict: a property the schema does
not name is a problem, so a misspelt field fails as surely as a wrong path or method.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

DOCUMENTS = ("gmail.v1", "calendar.v3", "drive.v3", "docs.v1", "sheets.v4", "slides.v1")


def _documents_dir() -> Path:
    spec = importlib.util.find_spec("googleapiclient")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("google-api-python-client is not installed: run `make setup` (its discovery documents are read)")
    return Path(next(iter(spec.submodule_search_locations))) / "discovery_cache" / "documents"


@functools.cache
def document(name: str) -> dict[str, Any]:
    return json.loads((_documents_dir() / f"{name}.json").read_text("utf-8"))


@dataclass(frozen=True, kw_only=True)
class Route:
    pattern: re.Pattern[str]
    http_method: str
    doc: str
    method: Mapping[str, Any]
    literal: int
    upload: bool


def _methods(resource: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from (resource.get("methods") or {}).values()
    for sub in (resource.get("resources") or {}).values():
        yield from _methods(sub)


def _compile(template: str) -> tuple[re.Pattern[str], int]:
    pattern = ""
    literal = 0
    for part in re.split(r"(\{\+?[^}]+\})", template):
        if part.startswith("{+"):
            pattern += f"(?P<{part[2:-1].replace('.', '_')}>.+)"
        elif part.startswith("{"):
            pattern += f"(?P<{part[1:-1].replace('.', '_')}>[^/]+)"
        else:
            pattern += re.escape(part)
            literal += len(part)
    return re.compile(f"^{pattern}$"), literal


@functools.cache
def routes() -> list[Route]:
    found = []
    for name in DOCUMENTS:
        doc = document(name)
        prefix = urlsplit(doc["rootUrl"]).path + doc["servicePath"]
        for method in _methods(doc):
            pattern, literal = _compile(prefix + method["path"])
            found.append(Route(pattern=pattern, http_method=method["httpMethod"], doc=name, method=method,
                               literal=literal, upload=False))
            simple = ((method.get("mediaUpload") or {}).get("protocols") or {}).get("simple")
            if simple:
                pattern, literal = _compile(simple["path"])
                found.append(Route(pattern=pattern, http_method=method["httpMethod"], doc=name, method=method,
                                   literal=literal, upload=True))
    # The most literal template first: .../values/{range}:append before .../values/{range}.
    found.sort(key=lambda r: -r.literal)
    return found


def find_route(method: str, path: str) -> tuple[Route, dict[str, str]] | str | None:
    """The route and its path parameters; a string naming the problem when only the method is wrong."""
    matched_path = False
    for route in routes():
        match = route.pattern.match(path)
        if match is None:
            continue
        matched_path = True
        if route.http_method == method:
            return route, {k: unquote(v) for k, v in match.groupdict().items()}
    return f"{method} is not a method of {path}" if matched_path else None


def _schema(node: Mapping[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return {"$ref": f"#/definitions/{node['$ref']}"}
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        out: dict[str, Any] = {"type": "object",
                               "properties": {k: _schema(v) for k, v in (node.get("properties") or {}).items()}}
        extra = node.get("additionalProperties")
        out["additionalProperties"] = _schema(extra) if isinstance(extra, Mapping) else False
        return out
    if kind == "array":
        return {"type": "array", "items": _schema(node.get("items") or {})}
    if kind in ("string", "integer", "number", "boolean"):
        out = {"type": kind}
        if kind == "string" and node.get("enum"):
            out["enum"] = list(node["enum"])
        return out
    return {}  # "any"


@functools.cache
def _definitions(doc: str) -> dict[str, Any]:
    return {name: _schema(schema) for name, schema in document(doc)["schemas"].items()}


def check_value(doc: str, schema_name: str, value: Any, where: str) -> list[str]:
    from jsonschema import Draft7Validator

    validator = Draft7Validator({"$ref": f"#/definitions/{schema_name}", "definitions": _definitions(doc)})
    return [f"{where}: {'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in validator.iter_errors(value)]


def _param_problem(name: str, spec: Mapping[str, Any], value: str) -> str | None:
    kind = spec.get("type")
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        return f"parameter '{name}' must be an integer, got {value!r}"
    if kind == "boolean" and value not in ("true", "false"):
        return f"parameter '{name}' must be true or false, got {value!r}"
    if spec.get("enum") and value not in spec["enum"]:
        return f"parameter '{name}' {value!r} is not one of {spec['enum']}"
    return None


def _json_part(body: bytes, content_type: str) -> tuple[Any, str | None]:
    """The JSON metadata of a multipart/related upload (its first part), or the body as JSON."""
    if content_type.startswith("multipart/related"):
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        parts = list(message.iter_parts())
        if len(parts) != 2 or parts[0].get_content_type() != "application/json":
            return None, "a multipart/related upload must be two parts: JSON metadata, then the media"
        return json.loads(parts[0].get_payload(decode=True)), None
    return json.loads(body), None


def validate_request(method: str, raw_path: str, body: bytes, content_type: str = "") -> tuple[str | None, list[str]]:
    """The method id a request names and every way it departs from the discovery document."""
    parts = urlsplit(raw_path)
    found = find_route(method, parts.path)
    if found is None:
        return None, [f"request: no Google API method has the path {parts.path}"]
    if isinstance(found, str):
        return None, [f"request: {found}"]
    route, path_params = found
    spec = route.method
    problems = []
    params = spec.get("parameters") or {}
    globals_ = document(route.doc).get("parameters") or {}
    for name, value in path_params.items():
        pspec = params.get(name)
        if pspec is None or pspec.get("location") != "path":
            problems.append(f"request: path parameter '{name}' is not one of {spec['id']}'s")
        elif (problem := _param_problem(name, pspec, value)) is not None:
            problems.append(f"request: {problem}")
    query: dict[str, list[str]] = {}
    for pair in parts.query.split("&") if parts.query else ():
        key, _, value = pair.partition("=")
        query.setdefault(unquote(key), []).append(unquote(value.replace("+", " ")))
    for name, values in query.items():
        pspec = params.get(name) or globals_.get(name)
        if pspec is None or (name in params and params[name].get("location") != "query"):
            problems.append(f"request: query parameter '{name}' is not one of {spec['id']}'s")
            continue
        if len(values) > 1 and not pspec.get("repeated"):
            problems.append(f"request: query parameter '{name}' is not repeatable")
        for value in values:
            if (problem := _param_problem(name, pspec, value)) is not None:
                problems.append(f"request: {problem}")
    for name, pspec in params.items():
        if pspec.get("required") and pspec.get("location") == "query" and name not in query:
            problems.append(f"request: required query parameter '{name}' is missing")
    if route.upload and query.get("uploadType") not in (["multipart"], ["media"]):
        problems.append("request: an upload needs uploadType=multipart or media")
    request_schema = (spec.get("request") or {}).get("$ref")
    if body:
        if request_schema is None and not route.upload:
            problems.append(f"request: {spec['id']} takes no body")
        else:
            try:
                value, problem = _json_part(body, content_type)
            except (ValueError, UnicodeDecodeError):
                value, problem = None, "the body is not JSON"
            if problem is not None:
                problems.append(f"request: {problem}")
            elif request_schema is not None:
                problems.extend(check_value(route.doc, request_schema, value, "request body"))
    return spec["id"], problems


def validate_response(method_id: str, answer: Any) -> list[str]:
    for route in routes():
        if route.method["id"] == method_id:
            response = (route.method.get("response") or {}).get("$ref")
            if response is None:
                return []
            return check_value(route.doc, response, answer, f"response of {method_id}")
    return [f"response: no method {method_id}"]
