"""Edges of the floor: argument defaults over odd schemas and their bounded caches, the depth
IronClaw resolves "capabilities" wrappers to, credential slots and path matching, effect lists,
JSON kinds in messages, plain values for policy hashes and provider errors as dictionaries."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from pincer.core import schema
from pincer.core.capabilities import MAX_WRAPPER_DEPTH, Capabilities, CredentialLocation, CredentialMapping
from pincer.core.effects import EffectKind, RuntimeKind, parse_effects
from pincer.core.errors import ProviderError, UsageError
from pincer.core.jsonread import json_kind
from pincer.core.schema import validate_args, with_defaults
from pincer.core.values import ToolSpec, plain_value


def spec(input_schema: dict[str, Any], name: str = "t") -> ToolSpec:
    return ToolSpec(name=name, description="", input_schema=input_schema, effects=frozenset(),
                    runtime=RuntimeKind.MCP, side_effecting=False, source="test")  # fmt: skip


# -- with_defaults over schemas of any shape ---------------------------------------------------------


def test_boolean_and_odd_property_schemas_are_passed_over() -> None:
    """``true`` is a valid JSON Schema for a property; it has no default to fill."""
    tool = spec(
        {
            "type": "object",
            "properties": {"any": True, "n": {"type": "integer", "default": 3}, "items": {"properties": []}},
            "required": ["any", "n", "items"],
        }
    )
    assert with_defaults(tool, {"any": 1, "items": {}}) == {"any": 1, "items": {}, "n": 3}


def test_a_given_nested_object_that_lacks_nothing_is_the_same_object() -> None:
    tool = spec(
        {
            "type": "object",
            "properties": {"page": {"type": "object", "properties": {"size": {"default": 10}}, "required": ["size"]}},
        }
    )
    args = {"page": {"size": 3}}
    assert with_defaults(tool, args) is args
    assert with_defaults(tool, {"page": {}}) == {"page": {"size": 10}}
    assert with_defaults(tool, {"page": "not an object"}) == {"page": "not an object"}


def test_defaults_are_followed_only_so_deep() -> None:
    """A schema nested past 32 levels is not followed further (a bound for hostile schemas)."""

    def nested(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"properties": {"leaf": {"default": "x"}}, "required": ["leaf"]}
        for _ in range(depth):
            node = {"properties": {"a": node}}
        return node

    def args(depth: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for _ in range(depth):
            value = {"a": value}
        return value

    def leaf(value: dict[str, Any], depth: int) -> Any:
        for _ in range(depth):
            value = value["a"]
        return value.get("leaf")

    assert leaf(with_defaults(spec(nested(32), "shallow"), args(32)), 32) == "x"
    assert leaf(with_defaults(spec(nested(33), "deep"), args(33)), 33) is None


def test_the_caches_of_plans_and_validators_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "_MAX_CACHED", 3)
    for i in range(7):
        tool = spec({"type": "object", "properties": {f"p{i}": {"type": "integer", "default": i}}, "required": [f"p{i}"]})
        assert with_defaults(tool, {}) == {f"p{i}": i}
        validate_args(tool, {f"p{i}": i})
        with pytest.raises(UsageError):
            validate_args(tool, {f"p{i}": "text"})
        assert len(schema._plans) <= 3 and len(schema._cache) <= 3


# -- capabilities ------------------------------------------------------------------------------------


def test_capabilities_wrappers_are_resolved_to_ironclaws_depth_and_no_further() -> None:
    inner = {"http": {"allowlist": [{"host": "api.example.com"}]}}

    def wrapped(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = inner
        for _ in range(depth):
            node = {"capabilities": node}
        return node

    reached = Capabilities.from_json(wrapped(MAX_WRAPPER_DEPTH), source="test")
    assert reached.http is not None and reached.http.allowlist[0].host == "api.example.com"
    assert Capabilities.from_json(wrapped(MAX_WRAPPER_DEPTH + 1), source="test").http is None


@pytest.mark.parametrize(
    ("location", "slot"),
    [
        (CredentialLocation(type="bearer"), "header:authorization"),
        (CredentialLocation(type="basic", username="u"), "header:authorization"),
        (CredentialLocation(type="header", header_name="X-Api-Key"), "header:x-api-key"),
        (CredentialLocation(type="query_param", param_name="key"), "query:key"),
        (CredentialLocation(type="cookie", param_name="sid"), "cookie:sid"),
        (CredentialLocation(type="url_path", placeholder="TOKEN"), "url:TOKEN"),
    ],
)
def test_each_credential_location_writes_one_slot(location: CredentialLocation, slot: str) -> None:
    assert location.slot == slot


def test_a_credential_location_missing_its_name_is_refused() -> None:
    with pytest.raises(UsageError, match="a header credential location needs header_name"):
        CredentialLocation(type="header")
    with pytest.raises(UsageError, match="unknown credential location 'smoke'") as info:
        CredentialLocation(type="smoke")  # type: ignore[arg-type]
    assert "bearer" in (info.value.hint or "")


def test_the_longest_matching_path_pattern_wins() -> None:
    mapping = CredentialMapping(
        secret_name="s", location=CredentialLocation(type="bearer"), host_patterns=("api.example.com",),
        path_patterns=("/v1/*", "/v1/admin/*", "/v2"),
    )  # fmt: skip
    assert mapping.path_match_length("/v1/admin/users") == len("/v1/admin/")
    assert mapping.path_match_length("/v1/items") == len("/v1/")
    assert mapping.path_match_length("/v3/x") is None
    anywhere = CredentialMapping(secret_name="s", location=CredentialLocation(type="bearer"), host_patterns=("h",))
    assert anywhere.path_match_length("/whatever") == 0


# -- effects, JSON kinds, plain values, provider errors ----------------------------------------------


@pytest.mark.parametrize(("value", "kind"), [("network", "str"), ({"network": True}, "dict"), (None, "NoneType")])
def test_effects_must_be_a_list_of_names(value: object, kind: str) -> None:
    with pytest.raises(UsageError, match=f"tool.effects: expected a list of effect names, got {kind}"):
        parse_effects(value, source="tool.effects")
    assert parse_effects(("network",)) == frozenset({EffectKind.NETWORK})


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "null"), (True, "true/false"), (1.5, "a number"), ("s", "a string"), ({}, "an object"),
     ((1,), "a list"), (b"raw", "bytes")],
)  # fmt: skip
def test_json_kind_names_a_type_never_the_value(value: object, kind: str) -> None:
    assert json_kind(value) == kind


def test_plain_value_turns_what_json_lacks_into_stable_plain_values() -> None:
    class Colour(enum.Enum):
        RED = "red"

    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert plain_value({"c": Colour.RED, 1: {3, 1, 2}, "t": (1, None), "o": Opaque()}) == {
        "c": "red", "1": [1, 2, 3], "t": [1, None], "o": "opaque",
    }  # fmt: skip


def test_a_provider_error_says_its_status_and_wait_only_when_known() -> None:
    assert ProviderError("down").to_dict() == {"code": "provider_error", "message": "down"}
    full = ProviderError("slow down", hint="wait", retry_after_s=1.23456, status=429).to_dict()
    assert full == {"code": "provider_error", "message": "slow down", "hint": "wait", "status": 429, "retry_after_s": 1.235}
