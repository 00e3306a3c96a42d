"""A local GitHub REST API on 127.0.0.1:0 that speaks GitHub's own OpenAPI description.

The description is npm ``@octokit/openapi`` (installed by ``make builtins-deps`` into
``.cache/npm-openapi``). Every request is validated against it with openapi-core (path, method,
path and query parameters, JSON body); a request the description does not allow is answered 400
and recorded in ``errors``. A valid one is answered with the operation's own example from the
description for its success status, and that response is validated against the response schema
too (``errors`` again), so neither side can drift from GitHub's shapes unnoticed.

``script`` holds canned answers served first (rate limits, echoes), each ``(status, headers,
body)``; ``echo_auth`` copies the request's Authorization header into the answer (the leak test).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / ".cache" / "npm-openapi" / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
SERVER_URL = "https://api.github.com"
SERVER_STOP_TIMEOUT_S = 5.0
SERVER_POLL_INTERVAL_S = 0.02


@functools.cache
def spec() -> dict[str, Any]:
    if not SPEC_PATH.exists():
        pytest.fail(f"GitHub's OpenAPI description is missing at {SPEC_PATH}: run `make builtins-deps`")
    return json.loads(SPEC_PATH.read_text())


@functools.cache
def openapi() -> Any:
    from openapi_core import Config, OpenAPI

    # The description is GitHub's published one; validating the 13 MB document itself each run
    # would only re-check GitHub's work.
    return OpenAPI.from_dict(spec(), config=Config(spec_validator_cls=None))


@functools.cache
def _routes() -> list[tuple[re.Pattern[str], str]]:
    routes = []
    for template in spec()["paths"]:
        pattern = re.escape(template)
        # {path} (a file) and {ref} (heads/main) span segments, as on GitHub.
        pattern = re.sub(r"\\\{(path|ref)\\\}$", ".+", pattern)
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", pattern)
        routes.append((re.compile(f"^{pattern}$"), template))
    # Literal segments win over parameters (/repos/{o}/{r}/pulls/comments vs .../pulls/{n}).
    # A segment-spanning {path}/{ref} only when nothing more specific matches.
    routes.sort(key=lambda r: (".+" in r[0].pattern, r[1].count("{")))
    return routes


def operation(method: str, path: str) -> tuple[str, dict[str, Any]] | None:
    for pattern, template in _routes():
        if pattern.match(path):
            op = spec()["paths"][template].get(method.lower())
            if op is not None:
                return template, op
    return None


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def example_answer(op: dict[str, Any]) -> tuple[int, Any]:
    """The operation's success status and its example body (None for 204s)."""
    responses = op["responses"]
    status = min(int(s) for s in responses if s.startswith("2"))
    response = _resolve(responses[str(status)])
    content = (response.get("content") or {}).get("application/json")
    if content is None:
        return status, None
    if "example" in content:
        return status, content["example"]
    examples = content.get("examples") or {}
    for value in examples.values():
        return status, _resolve(value).get("value")
    raise AssertionError(f"no example for {op.get('operationId')}")


_FORMATS = {"date-time": "2011-01-26T19:01:12Z", "uri": "https://example.com/x", "email": "mona@example.com",
            "date": "2011-01-26", "uuid": "00000000-0000-4000-8000-000000000000"}


def _options(s: dict[str, Any]) -> list[Any]:
    return [_resolve(o) for o in (s.get("anyOf") or s.get("oneOf") or [])]


def synth(schema: Any) -> Any:
    """A smallest value the schema accepts (required fields filled, optional ones left out)."""
    s = _resolve(schema)
    if "allOf" in s:
        return conform({}, s)
    if _options(s):
        options = [o for o in _options(s) if o.get("type") != "null"]
        return synth(options[0]) if options else None
    if s.get("nullable"):
        return None
    if "enum" in s:
        return s["enum"][0]
    kind = s.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in s:
        return conform({}, s)
    return {"array": [], "integer": s.get("minimum", 0), "number": 0, "boolean": False, "null": None}.get(
        str(kind), _FORMATS.get(s.get("format", ""), "x")
    )


def conform(value: Any, schema: Any) -> Any:
    """GitHub's own example made to fit its schema: its published examples leave out fields the
    schema requires (``language`` of a nested repository) or hold nulls it forbids; those get the
    smallest value the schema takes. What the example says stays as it is."""
    s = _resolve(schema)
    if "allOf" in s:
        for part in s["allOf"]:
            value = conform(value, part)
        return value
    options = _options(s)
    discriminator = s.get("discriminator")
    if options and discriminator and isinstance(value, dict):
        prop = discriminator["propertyName"]
        mapping = discriminator.get("mapping") or {}
        raw = s.get("anyOf") or s.get("oneOf") or []
        if prop not in value:
            if mapping:
                # The variant whose properties hold the example's keys (private vs public user).
                def misfit(item: tuple[str, str]) -> int:
                    props = _resolve({"$ref": item[1]}).get("properties") or {}
                    return sum(k not in props for k in value)

                key, ref = min(mapping.items(), key=misfit)
            else:
                ref = raw[0]["$ref"]
                key = ref.rsplit("/", 1)[-1]
            value = {**value, prop: key}
        ref = mapping.get(value[prop]) or next((o["$ref"] for o in raw if o.get("$ref", "").endswith("/" + str(value[prop]))), None)
        return conform(value, {"$ref": ref}) if ref else value
    if options:
        if value is None and (s.get("nullable") or any(o.get("type") == "null" or o.get("nullable") for o in options)):
            return None
        kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
        fitting = [o for o in options if o.get("type") == kind or (kind == "object" and "properties" in o)]
        return conform(value, fitting[0]) if fitting else value
    if value is None:
        return None if s.get("nullable") or s.get("type") in (None, "null") else synth(s)
    if isinstance(value, dict) and ("properties" in s or s.get("type") == "object"):
        props = s.get("properties") or {}
        out = {k: (conform(v, props[k]) if k in props else v) for k, v in value.items()}
        for name in s.get("required") or []:
            if name not in out:
                out[name] = synth(props.get(name, {}))
        return out
    if isinstance(value, list) and "items" in s:
        return [conform(v, s["items"]) for v in value]
    return value


def success_schema(op: dict[str, Any]) -> Any:
    responses = op["responses"]
    status = min(int(s) for s in responses if s.startswith("2"))
    content = (_resolve(responses[str(status)]).get("content") or {}).get("application/json")
    return (content or {}).get("schema")


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    operation_id: str | None = None


@dataclass
class FakeGitHub:
    server: ThreadingHTTPServer
    requests: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    script: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    echo_auth: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def validate_exchange(method: str, raw_path: str, body: bytes, status: int, answer: bytes) -> list[str]:
    """openapi-core's verdict on one request and its answer, as messages (empty: both valid)."""
    from openapi_core.testing import MockRequest, MockResponse

    url = urlsplit(raw_path)
    args = {k: v[-1] for k, v in parse_qs(url.query).items()}
    path = url.path
    found = operation(method, path)
    if found is not None and found[0].endswith(("{path}", "{ref}")):
        # openapi-core keeps path parameters to one segment; GitHub's {path} and {ref} span several.
        fixed = found[0].count("/") - 1
        head = path.split("/")[: fixed + 1]
        path = "/".join(head) + "/" + path[len("/".join(head)) + 1 :].replace("/", "%2F")
    request = MockRequest(
        SERVER_URL, method.lower(), path, args=args, data=body or None,
        content_type="application/json" if body else None,
    )
    problems = _strict_problems(method, url.path, args, body) if found is not None else []
    result = openapi().unmarshal_request(request)
    for error in result.errors:
        problems.append(f"request {method} {url.path}: {error!r}: {getattr(error, '__cause__', '')!r}")
    response = MockResponse(answer or b"", status_code=status, content_type="application/json" if answer else None)
    if not problems:
        checked = openapi().unmarshal_response(request, response)
        for error in checked.errors:
            problems.append(f"response {status} to {method} {url.path}: {error!r}: {getattr(error, '__cause__', '')!r}")
    return problems


def _strict_problems(method: str, path: str, args: dict[str, str], body: bytes) -> list[str]:
    """What openapi-core lets through but GitHub would ignore: a query parameter or a top-level
    body field the operation does not declare (a misspelt optional field is a silent bug)."""
    found = operation(method, path)
    if found is None:
        return []
    template, op = found
    declared = {
        _resolve(p)["name"]
        for p in [*spec()["paths"][template].get("parameters", []), *op.get("parameters", [])]
        if _resolve(p).get("in") == "query"
    }
    problems = [f"request {method} {path}: query parameter {name!r} is not in GitHub's description"
                for name in sorted(set(args) - declared)]
    if body:
        schema = _resolve(((_resolve(op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema") or {})
        props: set[str] = set(schema.get("properties") or {})
        for option in schema.get("oneOf") or schema.get("anyOf") or schema.get("allOf") or []:
            props |= set(_resolve(option).get("properties") or {})
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if props and isinstance(data, dict):
            problems += [f"request {method} {path}: body field {k!r} is not in GitHub's description" for k in sorted(set(data) - props)]
    return problems


class _Handler(BaseHTTPRequestHandler):
    state: FakeGitHub
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        found = operation(self.command, url.path)
        seen = Seen(self.command, url.path, parse_qs(url.query), dict(self.headers.items()), body,
                    found[1].get("operationId") if found else None)
        state = self.state
        with state.lock:
            state.requests.append(seen)
            canned = state.script.pop(0) if state.script else None
        if canned is not None:
            status, headers, payload = canned
            if state.echo_auth and isinstance(payload, dict):
                payload = {**payload, "message": f"echo: {self.headers.get('Authorization')}"}
            self._reply(status, json.dumps(payload).encode() if payload is not None else b"", headers)
            return
        if found is None:
            state.errors.append(f"request {self.command} {url.path}: no such operation in GitHub's description")
            self._reply(404, json.dumps({"message": "Not Found"}).encode())
            return
        status, example = example_answer(found[1])
        if example is not None and (schema := success_schema(found[1])) is not None:
            example = conform(example, schema)
        if state.echo_auth and isinstance(example, dict):
            example = {**example, "description": f"echo: {self.headers.get('Authorization')}"}
        answer = json.dumps(example).encode() if example is not None else b""
        problems = validate_exchange(self.command, self.path, raw, status, answer)
        if state.echo_auth:
            problems = [p for p in problems if not p.startswith("response")]
        if any(p.startswith("request") for p in problems):
            state.errors.extend(problems)
            self._reply(400, json.dumps({"message": "; ".join(problems)[:2000]}).encode())
            return
        state.errors.extend(problems)
        self._reply(status, answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if body:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def serve() -> Iterator[FakeGitHub]:
    openapi()  # load the description before the first request, not inside its timeout
    handler = type("Handler", (_Handler,), {})
    server = _QuietServer(("127.0.0.1", 0), handler)
    state = FakeGitHub(server=server)
    handler.state = state
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SERVER_POLL_INTERVAL_S}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(SERVER_STOP_TIMEOUT_S)
