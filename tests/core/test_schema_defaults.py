"""Defaults a schema declares for required properties are applied before validation
(core/schema.py ``with_defaults``), as ``@playwright/mcp``'s schemas need: zod's ``.default()``
makes a property both required and defaulted, and the server takes calls without it.

Failed before: ``browser_console_messages`` called with ``{}`` was refused ("'level' is a required
property"); tests/runtimes/mcp/test_passthrough.py calls the real server."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pincer.core.effects import RuntimeKind
from pincer.core.schema import validate_args, with_defaults
from pincer.core.values import ToolSpec

# browser_console_messages of @playwright/mcp 0.0.86, as it lists it.
CONSOLE = {
    "type": "object",
    "properties": {
        "level": {"type": "string", "enum": ["error", "warning", "info", "debug"], "default": "info"},
        "all": {"type": "boolean"},
        "filename": {"type": "string"},
    },
    "required": ["level"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {
        "page": {
            "type": "object",
            "properties": {"size": {"type": "integer", "default": 10}, "cursor": {"type": "string", "default": None}},
            "required": ["size"],
        },
        "limit": {"type": "integer", "default": 5},  # optional: the server applies it itself
        "tags": {"type": "array", "default": ["a"]},
    },
    "required": ["tags"],
}


def spec(schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name="t", description="", input_schema=schema, effects=frozenset(), runtime=RuntimeKind.MCP,
                    side_effecting=False, source="test")  # fmt: skip


def test_a_required_property_with_a_default_is_filled_and_then_valid() -> None:
    tool = spec(CONSOLE)
    filled = with_defaults(tool, {})
    assert filled == {"level": "info"}
    validate_args(tool, filled)
    given_args = {"level": "error", "all": True}
    assert with_defaults(tool, given_args) is given_args  # nothing missing: the very same object


def test_nested_objects_that_are_given_get_their_required_defaults_and_optional_ones_stay_out() -> None:
    tool = spec(NESTED)
    assert with_defaults(tool, {"page": {}}) == {"page": {"size": 10}, "tags": ["a"]}
    assert with_defaults(tool, {}) == {"tags": ["a"]}  # an absent object is not made up
    first = with_defaults(tool, {})
    first["tags"].append("b")
    assert with_defaults(tool, {}) == {"tags": ["a"]}  # each call gets its own copy of a default


@given(st.dictionaries(st.sampled_from(["level", "all", "filename", "other"]), st.one_of(st.none(), st.booleans(), st.text(max_size=5))))
def test_filling_only_adds_missing_required_keys_and_never_changes_given_ones(args: dict[str, Any]) -> None:
    filled = with_defaults(spec(CONSOLE), args)
    assert {k: v for k, v in filled.items() if k in args} == args
    assert set(filled) - set(args) == ({"level"} - set(args))


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_arguments_that_are_not_an_object_are_left_for_validation_to_refuse(args: Any) -> None:
    assert with_defaults(spec(CONSOLE), args) is args
