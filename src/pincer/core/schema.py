"""Argument validation against a tool's JSON Schema (draft 2020-12 by default, draft 7 and the
other drafts when ``$schema`` names them).

Validators are compiled once per schema by ``jsonschema-rs`` and cached by the tool's
definition hash: validation sits on every call, and the compiled Rust validator checks a small
object in well under a microsecond where the pure-Python one takes ~15 us.

This module is pincer's one JSON Schema validator: the chain's arguments, a script manifest's and a
built tool's ``input_schema`` (:func:`schema_problem`), and the builder's own forms
(:func:`value_problem`) are all decided by ``jsonschema-rs`` with the same options, formats
included, so a schema or a value one path accepts is never refused by another.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from pincer.core.errors import ArgumentsInvalid, UsageError
from pincer.core.values import ToolSpec

__all__ = [
    "validate_args", "with_defaults", "validator_for", "describe_schema_error", "compile_schema", "schema_problem",
    "value_problem",
]  # fmt: skip

_MAX_REPORTED = 3
_MAX_CACHED = 4096  # bound memory when tools churn (MCP servers reloading)

_cache: dict[str, Any] = {}
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class _Fill:
    """One property of a schema's defaults plan: its ``default`` (when the property is required)
    and the plan of the object it holds."""

    key: str
    default: Any
    nested: tuple[_Fill, ...]


_plans: dict[str, tuple[_Fill, ...]] = {}


def validator_for(spec: ToolSpec) -> Any:
    validator = _cache.get(spec.definition_hash)
    if validator is None:
        validator = _build(spec)
        if len(_cache) >= _MAX_CACHED:
            _cache.clear()
        _cache[spec.definition_hash] = validator
    return validator


def compile_schema(schema: Mapping[str, Any]) -> Any:
    """The validator for ``schema`` (its ``$schema`` draft, 2020-12 by default; formats checked).

    Raises ``jsonschema_rs.ValidationError``, ``ValueError`` or ``TypeError`` for a schema that
    is not valid (:func:`schema_problem` turns that into a sentence)."""
    return jsonschema_rs.validator_for(dict(schema), validate_formats=True)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """None when ``schema`` is a JSON Schema the chain can validate arguments with, else what is wrong."""
    try:
        compile_schema(schema)
    except (jsonschema_rs.ValidationError, ValueError, TypeError) as exc:
        return _first_line(exc)
    return None


def value_problem(validator: Any, value: Any) -> str | None:
    """None when ``value`` matches, else the first problem (by path) as ``where: message``."""
    try:
        if validator.is_valid(value):
            return None
        errors = list(validator.iter_errors(value))
    except (ValueError, TypeError, OverflowError) as exc:
        return f"(top level): not plain JSON: {exc}"
    errors.sort(key=lambda e: [str(p) for p in e.instance_path])
    first = errors[0]
    return f"{'/'.join(map(str, first.instance_path)) or '(top level)'}: {first.message}"


def _build(spec: ToolSpec) -> Any:
    schema = dict(spec.input_schema) if spec.input_schema else {"type": "object"}
    try:
        return compile_schema(schema)
    except (jsonschema_rs.ValidationError, ValueError, TypeError) as exc:
        raise UsageError(
            f"tool {spec.name} has an invalid input schema: {_first_line(exc)}",
            hint="fix the tool's schema; calls to it cannot be validated",
        ) from None


def describe_schema_error(error: Any) -> str:
    path = "args" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.instance_path)
    rule = next((str(p) for p in reversed(error.schema_path) if not isinstance(p, int)), "schema")
    return f"{path}: {error.message} (rule: {rule})"


def _plan(schema: Any, depth: int = 0) -> tuple[_Fill, ...]:
    """What :func:`with_defaults` fills in objects of ``schema``: required properties with a
    ``default``, at any depth of ``properties`` (``$ref``, ``allOf`` and the like are not followed)."""
    if not isinstance(schema, Mapping) or depth > 32:
        return ()
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    fills: list[_Fill] = []
    for key, sub in properties.items():
        if not isinstance(key, str) or not isinstance(sub, Mapping):
            continue
        default = copy.deepcopy(sub["default"]) if key in required and "default" in sub else _MISSING
        nested = _plan(sub, depth + 1)
        if default is not _MISSING or nested:
            fills.append(_Fill(key=key, default=default, nested=nested))
    return tuple(fills)


def _fill(args: Mapping[str, Any], fills: tuple[_Fill, ...]) -> Mapping[str, Any]:
    filled: dict[str, Any] | None = None
    for fill in fills:
        if fill.key not in args:
            if fill.default is not _MISSING:
                filled = dict(args) if filled is None else filled
                filled[fill.key] = copy.deepcopy(fill.default)
            continue
        value = args[fill.key]
        if fill.nested and isinstance(value, Mapping):
            inner = _fill(value, fill.nested)
            if inner is not value:
                filled = dict(args) if filled is None else filled
                filled[fill.key] = inner
    return args if filled is None else filled


def with_defaults(spec: ToolSpec, args: Any) -> Any:
    """``args`` with the ``default`` of every *required* property it leaves out, so the call is
    validated and sent with them (``args`` itself, unchanged, when nothing is missing).

    A schema that marks a property required and gives it a default says the server accepts the
    call without it (``@playwright/mcp`` does, from zod's ``.default()``); validating the bare
    call would refuse it. Optional properties are left out as given: the server applies their
    defaults itself, and a default that does not match its own type (``"default": null`` on a
    string, common in generated schemas) would turn a valid call into a refused one."""
    if not isinstance(args, Mapping):
        return args
    plan = _plans.get(spec.definition_hash)
    if plan is None:
        plan = _plan(spec.input_schema)
        if len(_plans) >= _MAX_CACHED:
            _plans.clear()
        _plans[spec.definition_hash] = plan
    return _fill(args, plan) if plan else args


def validate_args(spec: ToolSpec, args: Any) -> None:
    """Raise ArgumentsInvalid naming the failing path and the rule."""
    if not isinstance(args, Mapping):
        raise ArgumentsInvalid(
            f"arguments for {spec.name} must be a JSON object, got {type(args).__name__}",
            hint='pass an object such as {"text": "hi"}',
        )
    validator = validator_for(spec)
    try:
        if validator.is_valid(args):
            return
        errors = list(validator.iter_errors(args))
    except (ValueError, TypeError, OverflowError) as exc:  # values JSON cannot carry (NaN, huge ints)
        raise ArgumentsInvalid(f"arguments for {spec.name} are not plain JSON: {exc}") from None
    errors.sort(key=lambda e: (len(e.instance_path), [str(p) for p in e.instance_path]))
    described = "; ".join(describe_schema_error(e) for e in errors[:_MAX_REPORTED])
    more = f" (+{len(errors) - _MAX_REPORTED} more)" if len(errors) > _MAX_REPORTED else ""
    raise ArgumentsInvalid(
        f"invalid arguments for {spec.name}: {described}{more}",
        hint=f"`pincer tools show {spec.name}` prints its input schema",
    )
