"""One JSON Schema validator: the chain, the script manifest and the builder decide a schema (and a
value) the same way.

Before: the chain compiled schemas with jsonschema-rs (ECMA-262 regexes, formats checked) while the
script manifest and the builder checked them with the pure-Python ``jsonschema`` (Python regexes, no
formats): ``\\p{L}+`` and ``(?<n>x)`` were refused by the manifest and the builder and accepted by
the chain, and a ``"format": "date"`` value the chain refused passed the builder's forms.
"""

from __future__ import annotations

from typing import Any

import pytest

from pincer.builder.plan import Allowance, PlanInvalid, parse_plan
from pincer.core.effects import RuntimeKind
from pincer.core.errors import ArgumentsInvalid, ManifestError, UsageError
from pincer.core.schema import compile_schema, validate_args, validator_for, value_problem
from pincer.core.values import ToolSpec
from pincer.runtimes.script import parse_manifest

PROPERTY_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "string", "pattern": r"\p{L}+"},  # ECMA-262 with Unicode classes
    {"type": "string", "pattern": "(?<n>x)"},  # an ECMA-262 named group
    {"type": "string", "pattern": r"\d+"},
    {"type": "string", "pattern": "["},
    {"type": "string", "pattern": "a{2,1}"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "no-such-format"},
    {"type": "nope"},
    {"type": "array", "minItems": -1},
]


def _spec(schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        name="t", description="", input_schema=schema, effects=frozenset(), runtime=RuntimeKind.NATIVE,
        side_effecting=False, source="test",
    )  # fmt: skip


def _chain_accepts(schema: dict[str, Any]) -> bool:
    try:
        validator_for(_spec(schema))
    except UsageError:
        return False
    return True


def _manifest_accepts(schema: dict[str, Any]) -> bool:
    manifest = {"name": "wc", "description": "count", "command": ["/usr/bin/wc", "--", "{path}"], "input_schema": schema}
    try:
        parse_manifest(manifest)
    except ManifestError as exc:
        assert "not a valid JSON Schema" in str(exc), exc
        return False
    return True


def _plan_accepts(schema: dict[str, Any]) -> bool:
    plan = {"name": "wc", "description": "count", "input_schema": schema, "hosts": [], "effects": []}
    try:
        parse_plan(plan, Allowance())
    except PlanInvalid as exc:
        assert "not a valid JSON Schema" in str(exc), exc
        return False
    return True


@pytest.mark.parametrize("prop", PROPERTY_SCHEMAS, ids=lambda p: str(p))
def test_a_schema_is_accepted_by_every_path_or_by_none(prop: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"path": prop}}
    verdicts = {"chain": _chain_accepts(schema), "manifest": _manifest_accepts(schema), "builder": _plan_accepts(schema)}
    assert len(set(verdicts.values())) == 1, verdicts


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ({"type": "string", "format": "date"}, "2026-12-01"),
        ({"type": "string", "format": "date"}, "yesterday"),
        ({"type": "string", "format": "ipv4"}, "300.1.1.1"),
        ({"type": "string", "format": "email"}, "a@example.com"),
        ({"type": "string", "pattern": r"^\p{L}+$"}, "héllo"),
        ({"type": "string", "pattern": r"^\p{L}+$"}, "h3llo"),
    ],
)
def test_a_value_is_decided_the_same_by_the_chain_and_the_builder_forms(prop: dict[str, Any], value: str) -> None:
    schema = {"type": "object", "properties": {"v": prop}}
    try:
        validate_args(_spec(schema), {"v": value})
        chain = True
    except ArgumentsInvalid:
        chain = False
    # The builder's forms (submit_plan, submit_code) are checked through value_problem.
    builder = value_problem(compile_schema(schema), {"v": value}) is None
    assert chain == builder
