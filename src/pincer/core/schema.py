"""Argument validation against a tool's JSON Schema (draft 2020-12 or draft 7).

Validators are built once per schema and cached by the tool's definition hash: building one
costs far more than using it, and validation sits on every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

from pincer.core.errors import ArgumentsInvalid, UsageError
from pincer.core.values import ToolSpec

__all__ = ["validate_args", "validator_for", "describe_schema_error"]

_DRAFT7_IDS = ("http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema")
_MAX_REPORTED = 3


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    declared = str(schema.get("$schema", "")).rstrip("#")
    if declared in _DRAFT7_IDS:
        return Draft7Validator
    return Draft202012Validator


_cache: dict[str, Validator] = {}


def validator_for(spec: ToolSpec) -> Validator:
    validator = _cache.get(spec.definition_hash)
    if validator is None:
        validator = _build(spec)
        if len(_cache) > 4096:  # bound memory when tools churn (MCP servers reloading)
            _cache.clear()
        _cache[spec.definition_hash] = validator
    return validator


def _build(spec: ToolSpec) -> Validator:
    schema = dict(spec.input_schema) if spec.input_schema else {"type": "object"}
    cls = _validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UsageError(
            f"tool {spec.name} has an invalid input schema: {exc.message}",
            hint="fix the tool's schema; calls to it cannot be validated",
        ) from exc
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def describe_schema_error(error: jsonschema.ValidationError) -> str:
    path = "args" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{path}: {error.message} (rule: {error.validator})"


def validate_args(spec: ToolSpec, args: Any) -> None:
    """Raise ArgumentsInvalid naming the failing path and the rule."""
    if not isinstance(args, Mapping):
        raise ArgumentsInvalid(
            f"arguments for {spec.name} must be a JSON object, got {type(args).__name__}",
            hint='pass an object such as {"text": "hi"}',
        )
    validator = validator_for(spec)
    if validator.is_valid(args):
        return
    errors = sorted(validator.iter_errors(args), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    described = "; ".join(describe_schema_error(e) for e in errors[:_MAX_REPORTED])
    more = f" (+{len(errors) - _MAX_REPORTED} more)" if len(errors) > _MAX_REPORTED else ""
    raise ArgumentsInvalid(
        f"invalid arguments for {spec.name}: {described}{more}",
        hint=f"`pincer tools show {spec.name}` prints its input schema",
    )
