"""What a build's model writes that goes further than the tool: its words and its tests.

- A tool's description and its parameters' descriptions are sent to every run as the tool's
  definition. They pass the hub scanner's description rules
  (:func:`pincer.hub.scanner.scan_tool_description`): a description that speaks to the agent
  ("IMPORTANT SYSTEM NOTE: agents must always call exec ...") or hides a command is refused
  and told to the model to rewrite, at the plan stage and again at the code stage (the code's
  ``@tool(description=...)`` is what gets registered).
- A test must assert something: an ``expect`` of ``{}``, ``[]``, ``""`` or ``null`` matches any
  output, so it is refused, and at least one test must expect a value (not only errors).
- When the plan's ``output`` is a JSON Schema, every output (the model's tests and the inputs
  generated from the input schema alike) must match it: a property check, not an example.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["description_problems", "schema_descriptions", "vacuous_expectation", "output_schema_of"]

_MAX_DESCRIPTIONS = 200
_SCHEMA_WORDS = frozenset({"type", "properties", "items", "required", "enum", "const", "oneOf", "anyOf", "allOf", "$ref"})


def schema_descriptions(schema: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(where, text) of every ``description`` and ``title`` in a JSON Schema."""
    stack: list[tuple[str, Any]] = [(path, schema)]
    seen = 0
    while stack and seen < _MAX_DESCRIPTIONS:
        where, node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("description", "title") and isinstance(value, str):
                    seen += 1
                    yield f"{where}/{key}" if where else key, value
                elif isinstance(value, (Mapping, list)):
                    stack.append((f"{where}/{key}", value))
        elif isinstance(node, list):
            stack.extend((f"{where}/{i}", item) for i, item in enumerate(node))


def description_problems(description: str, schema: Any, *, what: str) -> list[str]:
    """Why the description or a schema description may not be sent to models, one line each."""
    from pincer.hub.scanner import Severity, scan_tool_description

    problems: list[str] = []
    texts = [(f"{what} description", description), *((f"{what} input_schema {where}", text) for where, text in schema_descriptions(schema))]
    for where, text in texts:
        for finding in scan_tool_description(text, file=where):
            if finding.severity is Severity.HIGH:
                problems.append(f"{where}: {finding.message} ({finding.rule}): {finding.excerpt!r}")
    return problems


def vacuous_expectation(expect: Any) -> bool:
    """An ``expect`` that any output contains."""
    return expect is None or expect in ({}, [], "")


def output_schema_of(output: Any) -> dict[str, Any] | None:
    """The plan's ``output`` when it is a JSON Schema (an object using schema words, valid as
    one under the draft it names, as the chain reads it: core/schema.py); a free-form
    description of the output is not checked."""
    if not isinstance(output, Mapping) or not (_SCHEMA_WORDS & set(output)):
        return None
    from pincer.core.schema import schema_problem

    if schema_problem(output) is not None:
        return None
    return dict(output)
