"""A skill's parameters: ``k=v`` pairs from the CLI, then checked and coerced against what the skill
declares. Apart from the template renderer (``render.py``) so that the command table and the
trigger engine, which only check parameters, do not import Jinja2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from pincer.core.errors import ArgumentsInvalid
from pincer.skills.model import Parameter, ParamType, Skill

__all__ = ["coerce_params", "parse_param_pairs"]


def parse_param_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``k=v`` strings from the CLI into a mapping (values stay strings until coerced)."""
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ArgumentsInvalid(f"--param {pair!r} is not KEY=VALUE", hint="e.g. --param path=src/app.py")
        params[key.strip()] = value
    return params


def coerce_params(skill: Skill, given: Mapping[str, object], *, allow_extra: bool = False) -> dict[str, object]:
    """Check ``given`` against the declared parameters: types (CLI strings coerced), enums,
    required ones present, defaults filled in, unknown ones refused."""
    declared = {p.name: p for p in skill.parameters}
    unknown = sorted(set(given) - set(declared))
    if unknown and not allow_extra:
        known = ", ".join(declared) or "none"
        raise ArgumentsInvalid(
            f"skill {skill.name!r} has no parameter {', '.join(repr(u) for u in unknown)}",
            hint=f"its parameters: {known} (`pincer skills show {skill.name}`)",
        )
    values: dict[str, object] = {}
    for name, param in declared.items():
        if name in given and given[name] is not None:
            values[name] = _coerce(skill, param, given[name])
        elif param.default is not None:
            values[name] = param.default
        elif param.required:
            raise ArgumentsInvalid(
                f"skill {skill.name!r} needs parameter {name!r} ({param.type.value})"
                + (f": {param.description}" if param.description else ""),
                hint=f"pass it: --param {name}=VALUE",
            )
    if allow_extra:
        values.update({k: v for k, v in given.items() if k not in declared})
    return values


def _coerce(skill: Skill, param: Parameter, value: object) -> object:
    def bad(expected: str) -> ArgumentsInvalid:
        return ArgumentsInvalid(
            f"parameter {param.name!r} of skill {skill.name!r} must be {expected}, got {str(value)[:60]!r}",
            hint=f"pass --param {param.name}=VALUE with a {param.type.value}",
        )

    kind = param.type
    result: object = value
    if kind is ParamType.STRING:
        if isinstance(value, (dict, list)):
            raise bad("text")
        result = value if isinstance(value, str) else json.dumps(value) if isinstance(value, bool) else str(value)
    elif kind is ParamType.INTEGER:
        if isinstance(value, bool):
            raise bad("an integer")
        if isinstance(value, str):
            try:
                result = int(value.strip(), 10)
            except ValueError:
                raise bad("an integer") from None
        elif isinstance(value, float) and value.is_integer():
            result = int(value)
        elif not isinstance(value, int):
            raise bad("an integer")
    elif kind is ParamType.NUMBER:
        if isinstance(value, bool):
            raise bad("a number")
        if isinstance(value, str):
            try:
                result = float(value.strip())
            except ValueError:
                raise bad("a number") from None
            if result != result or result in (float("inf"), float("-inf")):
                raise bad("a finite number")
            if result.is_integer() and re.fullmatch(r"\s*-?\d+\s*", value):
                result = int(result)
        elif not isinstance(value, (int, float)):
            raise bad("a number")
    elif kind is ParamType.BOOLEAN:
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("true", "yes", "on", "1"):
                result = True
            elif lowered in ("false", "no", "off", "0"):
                result = False
            else:
                raise bad("true or false")
        elif not isinstance(value, bool):
            raise bad("true or false")
    elif kind in (ParamType.ARRAY, ParamType.OBJECT):
        expected = list if kind is ParamType.ARRAY else dict
        if isinstance(value, str):
            try:
                result = json.loads(value)
            except ValueError:
                if kind is ParamType.ARRAY:
                    result = [item.strip() for item in value.split(",") if item.strip()]
                else:
                    raise bad("a JSON object") from None
        if not isinstance(result, expected):
            raise bad("a list" if kind is ParamType.ARRAY else "a JSON object")
    if param.enum is not None and result not in param.enum:
        allowed = ", ".join(repr(v) for v in param.enum)
        raise ArgumentsInvalid(
            f"parameter {param.name!r} of skill {skill.name!r} must be one of {allowed}, got {result!r}",
            hint=f"pass --param {param.name}=VALUE with one of the allowed values",
        )
    return result
