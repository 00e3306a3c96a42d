"""The ``submit_plan`` answer: parsed, checked against what the user allowed, refused or trimmed.

Rules (docs/builder.md):

- ``effects`` ``financial`` or ``execute_code``, or a wildcard host (``*``, ``*.example.com``):
  :class:`BuildRefused`, the build stops and nothing is written to the tools;
- a host not in the allowance (``--allow-host``, the session's grants) or a secret not in it
  (``--secret``): dropped and reported, never granted;
- everything else must match :data:`PLAN_SCHEMA`; anything else is an answer the model is told
  to correct (:class:`PlanInvalid`, not a refusal).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.core.effects import EffectKind
from pincer.core.errors import BuildRefused
from pincer.core.schema import compile_schema, schema_problem, value_problem

__all__ = ["Plan", "SecretUse", "Allowance", "PlanInvalid", "parse_plan", "PLAN_SCHEMA", "REFUSED_EFFECTS", "KNOWN_EFFECTS"]

REFUSED_EFFECTS = frozenset({"financial", "execute_code"})
KNOWN_EFFECTS = frozenset(e.value for e in EffectKind) - REFUSED_EFFECTS
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(:[0-9]{1,5})?")
_LOCATIONS = ("bearer", "header", "query", "url_path")

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the tool's name: lower-case letters, digits, - or _"},
        "description": {"type": "string", "description": "what the tool does, for the model that will call it"},
        "input_schema": {"type": "object", "description": "JSON Schema of the tool's params (an object schema)"},
        "output": {"description": "what the tool returns: a JSON Schema (then every test output is checked against it) or a free-form sketch"},
        "hosts": {"type": "array", "items": {"type": "string"}, "description": "hosts the tool calls over https"},
        "secrets": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "host": {"type": "string"},
                    "location": {"type": "object", "description": 'as in capabilities files: {"type": "bearer"} or '
                                 '{"type": "header", "name": "X-Api-Key"} or {"type": "query", "param_name": "key"}'},
                },
                "required": ["name", "host", "location"],
            },
        },
        "effects": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "description", "input_schema"],
}  # fmt: skip


class PlanInvalid(Exception):
    """The plan does not parse; the message goes back to the model."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SecretUse:
    name: str
    host: str
    location: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "location": dict(self.location)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Allowance:
    """What the user allowed this build: hosts (exact names) and secret names."""

    hosts: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    output: Any = None
    hosts: tuple[str, ...] = ()
    secrets: tuple[SecretUse, ...] = ()
    effects: tuple[str, ...] = ()
    dropped: tuple[str, ...] = field(default=())  # what was asked for and not granted, as sentences

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "output": self.output,
            "hosts": list(self.hosts),
            "secrets": [s.to_json() for s in self.secrets],
            "effects": list(self.effects),
            "dropped": list(self.dropped),
        }


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanInvalid(f"{what} must be a list of strings")
    return [v.strip() for v in value]


@functools.cache
def _plan_validator() -> Any:
    return compile_schema(PLAN_SCHEMA)


def parse_plan(args: Mapping[str, Any] | None, allowance: Allowance, *, name: str | None = None) -> Plan:
    """A checked plan; PlanInvalid (tell the model) or BuildRefused (stop the build)."""
    if not isinstance(args, Mapping):
        raise PlanInvalid("submit_plan's arguments are not a JSON object")
    problem = value_problem(_plan_validator(), dict(args))
    if problem:
        where, _, message = problem.partition(": ")
        raise PlanInvalid(f"submit_plan does not match its schema at {where}: {message}")
    tool_name = name or str(args["name"]).strip()
    if not _NAME.fullmatch(tool_name):
        raise PlanInvalid(f"name {tool_name!r} must be lower-case letters, digits, - or _, starting with a letter")
    schema_error = schema_problem(dict(args["input_schema"]))
    if schema_error:
        raise PlanInvalid(f"input_schema is not a valid JSON Schema: {schema_error}")
    if args["input_schema"].get("type", "object") != "object":
        raise PlanInvalid('input_schema must describe an object ("type": "object")')
    effects = _strings(args.get("effects"), "effects")
    refused = sorted(set(effects) & REFUSED_EFFECTS)
    if refused:
        raise BuildRefused(
            f"the plan asks for the effect(s) {', '.join(refused)}, which no built tool may have",
            hint="describe a tool without payments or code execution; register such tools by hand with reviewed capabilities",
        )
    unknown = sorted(set(effects) - KNOWN_EFFECTS)
    if unknown:
        raise PlanInvalid(f"unknown effect(s) {', '.join(unknown)}; use some of {', '.join(sorted(KNOWN_EFFECTS))}")
    hosts = [h.lower() for h in _strings(args.get("hosts"), "hosts")]
    raw_secrets = args.get("secrets") or []
    for host in hosts + [str(s.get("host", "")).lower() for s in raw_secrets if isinstance(s, Mapping)]:
        if "*" in host:
            raise BuildRefused(
                f"the plan asks for the wildcard host {host!r}; a built tool reaches named hosts only",
                hint="pass the exact hosts with --allow-host HOST",
            )
    dropped: list[str] = []
    kept_hosts: list[str] = []
    for host in dict.fromkeys(hosts):
        if not _HOST.fullmatch(host):
            raise PlanInvalid(f"host {host!r} is not a host name (no scheme, path or userinfo)")
        if host in allowance.hosts:
            kept_hosts.append(host)
        else:
            dropped.append(f"host {host} was dropped: it is not allowed (pass --allow-host {host} to allow it)")
    secrets: list[SecretUse] = []
    for item in raw_secrets:
        secret_name, host, location = str(item["name"]), str(item["host"]).lower(), item["location"]
        if not isinstance(location, Mapping) or location.get("type") not in _LOCATIONS:
            raise PlanInvalid(f"secret {secret_name}: location.type must be one of {', '.join(_LOCATIONS)}")
        if secret_name not in allowance.secrets:
            dropped.append(f"secret {secret_name} was dropped: it is not allowed (pass --secret {secret_name} to allow it)")
            continue
        if host not in kept_hosts:
            dropped.append(f"secret {secret_name} was dropped: its host {host} is not one the tool may reach")
            continue
        secrets.append(SecretUse(name=secret_name, host=host, location=dict(location)))
    from pincer.builder.vetting import description_problems

    description = str(args["description"]).strip()[:2000]
    problems = description_problems(description, args["input_schema"], what="the plan's")
    if problems:
        raise PlanInvalid(
            "the tool's description goes to every run that may call it, so it may only describe the tool: "
            + "; ".join(problems[:5]) + ". Describe what the tool does and returns, without instructions to the agent"
        )
    return Plan(
        name=tool_name,
        description=description,
        input_schema=dict(args["input_schema"]),
        output=args.get("output"),
        hosts=tuple(kept_hosts),
        secrets=tuple(secrets),
        effects=tuple(dict.fromkeys(effects)),
        dropped=tuple(dropped),
    )
