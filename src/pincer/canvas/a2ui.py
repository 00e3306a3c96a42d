"""A2UI messages, v0.8 and v0.9, recognised per message and checked against that version's
published JSON Schema (vendored from ``@a2ui/web_core`` 0.11.0 under ``schemas/``).

A message's version is what it says: ``"version": "v0.9"`` is v0.9; a message without
``version`` whose one action key is v0.8's (``beginRendering``, ``surfaceUpdate``,
``dataModelUpdate``, ``deleteSurface``) is v0.8. Anything else is refused.

Every refusal is an :class:`~pincer.core.errors.A2uiInvalid` that names the message (its index
in the batch and its action), the field (a JSON pointer into the message) and the rule that
failed, so the agent can fix exactly that field. Nothing is dropped: a batch with one bad
message is refused whole, before any of it reaches a canvas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs

from pincer.core.errors import A2uiInvalid

__all__ = ["A2uiMessage", "V08", "V09", "V08_ACTIONS", "V09_ACTIONS", "parse_messages", "component_names"]

V08 = "v0.8"
V09 = "v0.9"
V08_ACTIONS = ("beginRendering", "surfaceUpdate", "dataModelUpdate", "deleteSurface")
V09_ACTIONS = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")
_V09_DEFS = {
    "createSurface": "CreateSurfaceMessage",
    "updateComponents": "UpdateComponentsMessage",
    "updateDataModel": "UpdateDataModelMessage",
    "deleteSurface": "DeleteSurfaceMessage",
}
_V09_BASE = "https://a2ui.org/specification/v0_9/"
_HINT = "fix that field and send the batch again; docs/canvas.md lists the messages and components"
# Errors that only repeat a deeper one (a oneOf, or unevaluatedProperties losing its annotations
# when a property inside failed): the deeper one names the field.
_SUMMARY_KEYWORDS = frozenset({"oneOf", "anyOf", "unevaluatedProperties", "allOf", "$ref"})


@dataclass(frozen=True, kw_only=True, slots=True)
class A2uiMessage:
    """One valid message: its place in the batch, version, action and surface."""

    index: int
    version: str
    action: str
    surface_id: str
    body: Mapping[str, Any]  # the whole message, as sent


def _load(path: str) -> dict[str, Any]:
    text = resources.files("pincer.canvas").joinpath("schemas", path).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _v08_schema() -> dict[str, Any]:
    return _load("v0_8/server_to_client_with_standard_catalog.json")


@cache
def _v09_registry() -> jsonschema_rs.Registry:
    catalog = _load("v0_9/basic_catalog.json")
    # server_to_client.json refers to "catalog.json": the catalog in use, here the basic one.
    as_catalog = {**catalog, "$id": _V09_BASE + "catalog.json"}
    return jsonschema_rs.Registry(
        [
            (_V09_BASE + "server_to_client.json", _load("v0_9/server_to_client.json")),
            (_V09_BASE + "common_types.json", _load("v0_9/common_types.json")),
            (_V09_BASE + "catalog.json", as_catalog),
            (_V09_BASE + "catalogs/basic/catalog.json", catalog),
        ]
    )


@cache
def _validator(version: str, pointer: str) -> Any:
    """A compiled validator for one part of a version's schema (``pointer`` into its document)."""
    if version == V08:
        root = _v08_schema()
        if not pointer:
            return jsonschema_rs.validator_for(root)
        part: Any = root
        for key in pointer.strip("/").split("/"):
            part = part[key]
        return jsonschema_rs.validator_for(part)
    return jsonschema_rs.validator_for({"$ref": _V09_BASE + pointer}, registry=_v09_registry())


@cache
def component_names(version: str) -> tuple[str, ...]:
    """The standard (v0.8) or basic (v0.9) catalog's component names."""
    if version == V08:
        items = _v08_schema()["properties"]["surfaceUpdate"]["properties"]["components"]["items"]
        return tuple(items["properties"]["component"]["properties"])
    return tuple(_load("v0_9/basic_catalog.json")["components"])


def _pointer(path: Sequence[Any]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) if path else "/"


def _refuse(index: int, action: str | None, field: str, rule: str) -> A2uiInvalid:
    what = f"A2UI message {index}" + (f" ({action})" if action else "")
    return A2uiInvalid(f"{what}: field {field}: {rule}", hint=_HINT)


def _check(validator: Any, value: Any, *, index: int, action: str, prefix: Sequence[Any]) -> None:
    errors = list(validator.iter_errors(value))
    if not errors:
        return
    specific = [e for e in errors if (e.schema_path[-1] if e.schema_path else "") not in _SUMMARY_KEYWORDS] or errors
    best = max(specific, key=lambda e: len(e.instance_path))
    keyword = str(best.schema_path[-1]) if best.schema_path else "schema"
    message = best.message if len(best.message) <= 300 else best.message[:300] + "..."
    path = [*prefix, *best.instance_path]
    missing = getattr(best.kind, "property", None) if keyword == "required" else None
    if isinstance(missing, str):
        path.append(missing)  # name the missing field itself, not the object that lacks it
    raise _refuse(index, action, _pointer(path), f"{message} (rule: {keyword})")


def _version_of(index: int, message: Mapping[str, Any]) -> tuple[str, str]:
    declared = message.get("version")
    keys = [k for k in message if k != "version"]
    if declared is not None:
        if declared != V09:
            shown = json.dumps(declared)[:60]
            raise _refuse(index, None, "/version", f"{shown} is not an A2UI version pincer speaks (rule: \"v0.9\", or leave it out for v0.8)")
        allowed = V09_ACTIONS
    else:
        v09_only = [k for k in keys if k in V09_ACTIONS and k not in V08_ACTIONS]
        if v09_only:
            raise _refuse(index, v09_only[0], "/version", 'required: a v0.9 message carries "version": "v0.9" (rule: required)')
        allowed = V08_ACTIONS
    actions = [k for k in keys if k in allowed]
    if len(actions) != 1:
        names = ", ".join(allowed)
        found = ", ".join(keys[:5]) or "no keys"
        raise _refuse(index, None, "/", f"exactly one of {names} is required, found {found} (rule: one action per message)")
    return (V09 if declared is not None else V08), actions[0]


def _check_components(index: int, version: str, action: str, body: Mapping[str, Any]) -> None:
    """Name an unknown component type before the whole schema does (its oneOf says only
    that nothing matched), and check each component alone so the error points into it."""
    components = body.get("components")
    if not isinstance(components, list):
        return  # the schema names the field
    known = component_names(version)
    for position, component in enumerate(components):
        prefix = [action, "components", position]
        if not isinstance(component, dict):
            continue
        kind_value = component.get("component")
        if version == V09:
            if not isinstance(kind_value, str):
                continue  # the schema says what is missing or of the wrong type
            if kind_value not in known:
                raise _refuse(index, action, _pointer([*prefix, "component"]), f"unknown component {kind_value[:60]!r} (rule: the basic catalog has {', '.join(known)})")
            _check(_validator(V09, f"catalog.json#/components/{kind_value}"), component, index=index, action=action, prefix=prefix)
        elif isinstance(kind_value, dict):
            for name in kind_value:
                if name not in known:
                    raise _refuse(index, action, _pointer([*prefix, "component", name]), f"unknown component {name[:60]!r} (rule: the standard catalog has {', '.join(known)})")


def parse_messages(messages: Any) -> list[A2uiMessage]:
    """Check a batch (a list of messages, or one message) and return it as values; raises
    A2uiInvalid for the first message that fails, naming it, its field and the rule."""
    batch = messages if isinstance(messages, list) else [messages]
    if not batch:
        raise A2uiInvalid("no A2UI messages were given", hint="send a list of one or more A2UI messages")
    parsed = []
    for index, message in enumerate(batch):
        if not isinstance(message, dict):
            raise _refuse(index, None, "/", f"an A2UI message is a JSON object, not {type(message).__name__} (rule: type object)")
        version, action = _version_of(index, message)
        body = message[action]
        if isinstance(body, dict):
            _check_components(index, version, action, body)
        if version == V08:
            _check(_validator(V08, ""), message, index=index, action=action, prefix=[])
        else:
            _check(_validator(V09, f"server_to_client.json#/$defs/{_V09_DEFS[action]}"), message, index=index, action=action, prefix=[])
        parsed.append(A2uiMessage(index=index, version=version, action=action, surface_id=str(body["surfaceId"]), body=message))
    return parsed
