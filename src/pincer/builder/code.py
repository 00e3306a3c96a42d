"""The ``submit_code`` answer: the source, its tests and HTTP fixtures, and the static check.

The check reads the source with :func:`ast.parse` (parsing is not running it: the source is
never executed outside the WASM runner) and refuses imports the guest environment does not
provide, so the model hears about them before a build is tried.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pincer.core.schema import compile_schema, value_problem

__all__ = ["Submission", "TestCase", "Fixture", "CodeInvalid", "parse_submission", "check_source", "CODE_SCHEMA",
           "GUEST_MODULES", "MAX_TESTS", "MAX_FIXTURES"]  # fmt: skip

MAX_TESTS = 20
MAX_FIXTURES = 20
MAX_SOURCE_CHARS = 64 * 1024
# What the runner's interpreter holds besides pincer_guest: the pure standard library modules a
# tool needs (no os/socket/subprocess: WASI is stubbed, they could do nothing anyway).
GUEST_MODULES = frozenset({
    "pincer_guest", "json", "re", "math", "hashlib", "base64", "datetime", "time", "urllib", "urllib.parse",
    "collections", "itertools", "functools", "dataclasses", "typing", "string", "textwrap", "decimal",
    "fractions", "statistics", "random", "html", "uuid", "enum", "__future__", "copy", "operator", "bisect",
    "heapq", "unicodedata",
})  # fmt: skip

CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source": {"type": "string", "description": "the tool's Python module, written against pincer_guest"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "args": {"type": "object"},
                    "expect": {"description": 'a JSON value the output must contain, or {"error": true}'},
                },
                "required": ["args", "expect"],
            },
        },
        "fixtures": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "method": {"type": "string"},
                    "url": {"type": "string"},
                    "status": {"type": "integer"},
                    "body": {"description": "the response body: a string, or a JSON value sent as JSON"},
                },
                "required": ["method", "url"],
            },
        },
    },
    "required": ["source", "tests"],
}


class CodeInvalid(Exception):
    """The answer or its source does not parse or check; the message goes back to the model."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TestCase:
    args: Mapping[str, Any]
    expect: Any

    def to_json(self) -> dict[str, Any]:
        return {"args": dict(self.args), "expect": self.expect}


@dataclass(frozen=True, kw_only=True, slots=True)
class Fixture:
    method: str
    url: str
    status: int = 200
    body: Any = ""

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "url": self.url, "status": self.status, "body": self.body}


@dataclass(frozen=True, kw_only=True, slots=True)
class Submission:
    source: str
    tests: tuple[TestCase, ...]
    fixtures: tuple[Fixture, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"tests": [t.to_json() for t in self.tests], "fixtures": [f.to_json() for f in self.fixtures]}


@functools.cache
def _code_validator() -> Any:
    return compile_schema(CODE_SCHEMA)


def parse_submission(args: Mapping[str, Any] | None) -> Submission:
    if not isinstance(args, Mapping):
        raise CodeInvalid("submit_code's arguments are not a JSON object (send source, tests and fixtures)")
    problem = value_problem(_code_validator(), dict(args))
    if problem:
        where, _, message = problem.partition(": ")
        raise CodeInvalid(f"submit_code does not match its schema at {where}: {message}")
    source = str(args["source"])
    if len(source) > MAX_SOURCE_CHARS:
        raise CodeInvalid(f"the source is longer than {MAX_SOURCE_CHARS:,} characters")
    tests = tuple(TestCase(args=dict(t["args"]), expect=t["expect"]) for t in args["tests"][:MAX_TESTS])
    if not tests:
        raise CodeInvalid("submit_code needs at least one test (args and the expected output)")
    from pincer.builder.vetting import vacuous_expectation

    for number, test in enumerate(tests, start=1):
        if vacuous_expectation(test.expect):
            raise CodeInvalid(
                f"test {number} expects {json.dumps(test.expect)}, which any output contains: every test must say what "
                'the output holds (a value, an object with the keys and values it must have, or {"error": true})'
            )
    if all(t.expect == {"error": True} for t in tests):
        raise CodeInvalid("every test expects an error: add at least one test of what the tool returns when it works")
    fixtures = tuple(
        Fixture(method=str(f["method"]).upper(), url=str(f["url"]), status=int(f.get("status", 200)), body=f.get("body", ""))
        for f in (args.get("fixtures") or [])[:MAX_FIXTURES]
    )
    return Submission(source=source, tests=tests, fixtures=fixtures)


def check_source(source: str) -> None:
    """CodeInvalid unless the source parses, imports only guest modules and uses ``@tool``."""
    try:
        tree = ast.parse(source, filename="tool.py")
    except SyntaxError as exc:
        raise CodeInvalid(f"the source does not parse: line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting: fail closed
        raise CodeInvalid(f"the source does not parse ({type(exc).__name__})") from None
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise CodeInvalid("relative imports are not available in a tool module")
            imported.add(node.module or "")
    unavailable = sorted(m for m in imported if m not in GUEST_MODULES and m.split(".")[0] not in GUEST_MODULES)
    if unavailable:
        raise CodeInvalid(
            f"the source imports {', '.join(unavailable)}, which the guest environment does not provide; "
            f"use pincer_guest (http_request, workspace_read, log, ...) and these modules: {', '.join(sorted(GUEST_MODULES))}"
        )
    if "pincer_guest" not in imported:
        raise CodeInvalid("the source must import tool (and Tool) from pincer_guest and decorate one function with @tool")
    decorated = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
        and any(isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", "")) == "tool" for d in n.decorator_list)
    ]  # fmt: skip
    if len(decorated) != 1:
        raise CodeInvalid(f"the source must decorate exactly one function with @tool(description=..., schema=...); found {len(decorated)}")
