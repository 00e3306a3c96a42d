from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.effects import RuntimeKind
from pincer.core.errors import ArgumentsInvalid, UsageError
from pincer.core.schema import validate_args, validator_for
from pincer.core.values import ToolSpec


def spec(schema: dict) -> ToolSpec:
    return ToolSpec(
        name="t", description="", input_schema=schema, effects=frozenset(), runtime=RuntimeKind.NATIVE,
        side_effecting=False, source="test",
    )  # fmt: skip


SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}, "items": {"type": "array", "items": {"type": "string"}}},
    "required": ["n"],
    "additionalProperties": False,
}


def test_valid_args_pass_and_validator_is_cached() -> None:
    s = spec(SCHEMA)
    validate_args(s, {"n": 2, "items": ["a"]})
    assert validator_for(s) is validator_for(s)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({}, "args: \"n\" is a required property (rule: required)"),
        ({"n": "x"}, "args.n: \"x\" is not of type \"integer\" (rule: type)"),
        ({"n": 0}, "(rule: minimum)"),
        ({"n": 1, "items": ["a", 3]}, "args.items[1]: 3 is not of type \"string\""),
        ({"n": 1, "extra": True}, "(rule: additionalProperties)"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_errors_name_path_and_rule(args, needle) -> None:
    with pytest.raises(ArgumentsInvalid) as info:
        validate_args(spec(SCHEMA), args)
    assert needle in str(info.value)


def test_draft7_is_honoured() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"t": {"type": "array", "items": [{"type": "string"}], "additionalItems": False}}}  # fmt: skip
    validate_args(spec(draft7), {"t": ["a"]})
    with pytest.raises(ArgumentsInvalid, match="additionalItems"):
        validate_args(spec(draft7), {"t": ["a", "b"]})


def test_invalid_schema_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="invalid input schema"):
        validate_args(spec({"type": "nonsense"}), {})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_arbitrary_arguments_only_raise_arguments_invalid(value) -> None:
    try:
        validate_args(spec(SCHEMA), value)
    except ArgumentsInvalid as exc:
        assert exc.message


@given(st.text(max_size=200))
def test_cli_argument_parser_never_crashes(text: str) -> None:
    from pincer.cli.common import parse_json_arg

    try:
        parse_json_arg(text)
    except UsageError as exc:
        assert "--args is not valid JSON" in exc.message
