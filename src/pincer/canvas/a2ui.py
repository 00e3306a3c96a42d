"""A2UI messages, v0.8 and v0.9, recognised per message and checked against that version's
published JSON Schema (shipped from ``@a2ui/web_core`` 0.11.0 under ``schemas/``) and against the
catalog the message's surface names (``canvas/catalogs.py``).

A message's version is what it says: ``"version": "v0.9"`` is v0.9; a message without
``version`` whose one action key is v0.8's (``beginRendering``, ``surfaceUpdate``,
``dataModelUpdate``, ``deleteSurface``) is v0.8. Anything else is refused.

A surface's catalog is the one it names: v0.9's ``createSurface.catalogId``; v0.8's
``beginRendering.catalogId`` (the standard catalog when it names none), which may come after the
surface's components, in the same batch or a later one: when it changes the surface's catalog,
the components drawn before are checked again against it. A catalog the canvas does not know is
refused, with the config key that registers one.

Every refusal is an :class:`~pincer.core.errors.A2uiInvalid` that names the message (its index
in the batch and its action), the field (a JSON pointer into the message) and the rule that
failed, so the agent can fix exactly that field. Nothing is dropped: a batch with one bad
message is refused whole, before any of it reaches a canvas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from pincer.canvas.catalogs import (
    BASIC_V09,
    STANDARD_V08,
    Catalog,
    CatalogSet,
    default_catalogs,
    no_retrieval,
    unknown_catalog,
    v08_envelope,
)
from pincer.core.errors import A2uiInvalid

__all__ = [
    "A2uiMessage", "V08", "V09", "V08_ACTIONS", "V09_ACTIONS", "parse_messages", "component_names", "catalog_of", "check_client_message",
]  # fmt: skip

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
_HINT = "fix that field and send the batch again; docs/canvas.md lists the messages, catalogs and components"
# Errors that only repeat a deeper one (a oneOf, or unevaluatedProperties losing its annotations
# when a property inside failed): the deeper one names the field.
_SUMMARY_KEYWORDS = frozenset({"oneOf", "anyOf", "unevaluatedProperties", "allOf", "$ref"})
_LABELS = {STANDARD_V08: "the standard catalog", BASIC_V09: "the basic catalog"}


@dataclass(frozen=True, kw_only=True, slots=True)
class A2uiMessage:
    """One valid message: its place in the batch, version, action, surface and the catalog the
    surface uses (its id)."""

    index: int
    version: str
    action: str
    surface_id: str
    body: Mapping[str, Any]  # the whole message, as sent
    catalog_id: str | None = None


def catalog_of(version: str, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The catalog id a surface's messages name: v0.9's createSurface, v0.8's last
    beginRendering (None: none named yet)."""
    found: str | None = None
    key = "createSurface" if version == V09 else "beginRendering"
    for message in messages:
        body = message.get(key)
        if isinstance(body, Mapping):
            named = body.get("catalogId")
            if isinstance(named, str):
                found = named
            elif version == V08:
                found = STANDARD_V08
    return found


def component_names(version: str, catalog_id: str | None = None) -> tuple[str, ...]:
    """A built-in catalog's component names: v0.8's standard, v0.9's basic by default."""
    catalog = default_catalogs().find(version, catalog_id or (STANDARD_V08 if version == V08 else BASIC_V09))
    return catalog.component_names if catalog is not None else ()


def _basic(catalogs: CatalogSet) -> Catalog:
    found = catalogs.find(V09, BASIC_V09)
    if found is None:  # built in: always there
        raise A2uiInvalid("the basic catalog is missing", hint="reinstall pincer")
    return found


def _label(catalog: Catalog) -> str:
    return _LABELS.get(catalog.catalog_id) or ("the minimal catalog" if catalog.catalog_id.endswith("/minimal/catalog.json") else f"catalog {catalog.catalog_id!r}")


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


_V08_ENVELOPE: list[Any] = []


def _v08_envelope_validator() -> Any:
    if not _V08_ENVELOPE:
        _V08_ENVELOPE.append(jsonschema_rs.validator_for(v08_envelope(), validate_formats=True, retriever=no_retrieval))
    return _V08_ENVELOPE[0]


def _check_components(catalogs: CatalogSet, catalog: Catalog, *, index: int, action: str, body: Mapping[str, Any]) -> None:
    """Name an unknown component type before the whole schema does (its oneOf says only that
    nothing matched), and check each component alone against its catalog, so the error points
    into it."""
    components = body.get("components")
    if not isinstance(components, list):
        return  # the schema names the field
    known = catalog.component_names
    for position, component in enumerate(components):
        prefix = [action, "components", position]
        if not isinstance(component, dict):
            continue
        kind_value = component.get("component")
        if catalog.version == V09:
            if not isinstance(kind_value, str):
                continue  # the schema says what is missing or of the wrong type
            if kind_value not in known:
                raise _refuse(index, action, _pointer([*prefix, "component"]), f"unknown component {kind_value[:60]!r} (rule: {_label(catalog)} has {', '.join(known)})")
            _check(catalogs.validator(catalog, f"catalog.json#/components/{kind_value}"), component, index=index, action=action, prefix=prefix)
        elif isinstance(kind_value, dict):
            for name, props in kind_value.items():
                if name not in known:
                    raise _refuse(index, action, _pointer([*prefix, "component", name]), f"unknown component {name[:60]!r} (rule: {_label(catalog)} has {', '.join(known)})")
                _check(catalogs.validator(catalog, f"components/{name}"), props, index=index, action=action, prefix=[*prefix, "component", name])


def _check_v08(catalogs: CatalogSet, catalog: Catalog, *, index: int, action: str, message: Mapping[str, Any]) -> None:
    body = message[action]
    _check(_v08_envelope_validator(), message, index=index, action=action, prefix=[])
    if action == "surfaceUpdate":
        _check_components(catalogs, catalog, index=index, action=action, body=body)
    styles = body.get("styles") if action == "beginRendering" else None
    if styles is not None and catalog.styles is not None:
        _check(catalogs.validator(catalog, "styles"), styles, index=index, action=action, prefix=[action, "styles"])


def _check_v09(catalogs: CatalogSet, catalog: Catalog, *, index: int, action: str, message: Mapping[str, Any]) -> None:
    body = message[action]
    if isinstance(body, dict):
        _check_components(catalogs, catalog, index=index, action=action, body=body)
    _check(catalogs.validator(catalog, f"server_to_client.json#/$defs/{_V09_DEFS[action]}"), message, index=index, action=action, prefix=[])


def _surface_catalogs(
    batch: Sequence[tuple[int, str, str, Mapping[str, Any]]], catalogs: CatalogSet, prior: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[tuple[str, str], tuple[Catalog, int, str, str]]:
    """Per (version, surface): its catalog, and where it was named (index, action, field). A v0.8
    surface's catalog is its batch's last beginRendering's, else the one it had, else standard."""
    chosen: dict[tuple[str, str], tuple[str | None, int, str, str]] = {}
    for earlier_sid, messages in prior.items():
        earlier_version = V09 if any("version" in m for m in messages) else V08
        chosen[(earlier_version, earlier_sid)] = (catalog_of(earlier_version, messages), -1, "", "")
    for index, version, action, message in batch:
        body = message[action]
        sid = body.get("surfaceId") if isinstance(body, Mapping) else None
        if not isinstance(sid, str):
            continue
        if (version == V09 and action == "createSurface") or (version == V08 and action == "beginRendering"):
            named = body.get("catalogId")
            chosen[(version, sid)] = (named if isinstance(named, str) else None, index, action, f"/{action}/catalogId")
        elif (version, sid) not in chosen:
            chosen[(version, sid)] = (None, -1, "", "")
    resolved: dict[tuple[str, str], tuple[Catalog, int, str, str]] = {}
    for (version, sid), (catalog_id, index, action, field) in chosen.items():
        fallback = catalog_id if catalog_id is not None else (STANDARD_V08 if version == V08 else BASIC_V09)
        catalog = catalogs.find(version, fallback)
        if catalog is None:
            if index >= 0:
                raise unknown_catalog(index, action, field, fallback, catalogs.known(version))
            # a surface drawn before under a catalog since removed from config: the default one
            catalog = catalogs.find(V08, STANDARD_V08) if version == V08 else _basic(catalogs)
            if catalog is None:
                raise unknown_catalog(0, "beginRendering", "/beginRendering/catalogId", fallback, catalogs.known(version))
        resolved[(version, sid)] = (catalog, index, action, field)
    return resolved


def parse_messages(
    messages: Any, *, catalogs: CatalogSet | None = None, prior: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
) -> list[A2uiMessage]:
    """Check a batch (a list of messages, or one message) and return it as values; raises
    A2uiInvalid for the first message that fails, naming it, its field and the rule.

    ``catalogs`` are the catalogs the canvas knows (the built-in ones by default); ``prior`` the
    messages each surface already on the canvas was drawn with, which say its catalog (a v0.9
    update of a surface this batch does not create is checked against that surface's catalog,
    or the basic one)."""
    catalogs = catalogs if catalogs is not None else default_catalogs()
    prior = prior or {}
    batch = messages if isinstance(messages, list) else [messages]
    if not batch:
        raise A2uiInvalid("no A2UI messages were given", hint="send a list of one or more A2UI messages")
    shaped: list[tuple[int, str, str, Mapping[str, Any]]] = []
    for index, message in enumerate(batch):
        if not isinstance(message, dict):
            raise _refuse(index, None, "/", f"an A2UI message is a JSON object, not {type(message).__name__} (rule: type object)")
        version, action = _version_of(index, message)
        if version == V08:
            _check(_v08_envelope_validator(), message, index=index, action=action, prefix=[])
        elif not isinstance(message[action], dict) or not isinstance(message[action].get("surfaceId"), str):
            # no surface, so no catalog: the message schema (with the basic catalog) says what is wrong
            _check_v09(catalogs, _basic(catalogs), index=index, action=action, message=message)
        shaped.append((index, version, action, message))
    chosen = _surface_catalogs(shaped, catalogs, prior)
    parsed = []
    for index, version, action, message in shaped:
        body = message[action]
        catalog, _, _, _ = chosen[(version, str(body["surfaceId"]))]
        if version == V08:
            _check_v08(catalogs, catalog, index=index, action=action, message=message)
        else:
            _check_v09(catalogs, catalog, index=index, action=action, message=message)
        parsed.append(A2uiMessage(index=index, version=version, action=action, surface_id=str(body["surfaceId"]), body=message, catalog_id=catalog.catalog_id))
    _recheck_earlier(chosen, catalogs, prior)
    return parsed


def _recheck_earlier(chosen: Mapping[tuple[str, str], tuple[Catalog, int, str, str]], catalogs: CatalogSet, prior: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """A v0.8 beginRendering that gives a surface another catalog than its earlier components
    were checked against: those components must fit the new one too."""
    for (version, sid), (catalog, index, action, _) in chosen.items():
        earlier = prior.get(sid, ())
        if version != V08 or index < 0 or not earlier or catalog_of(V08, earlier) == catalog.catalog_id:
            continue
        for message in earlier:
            if "surfaceUpdate" not in message:
                continue
            try:
                _check_components(catalogs, catalog, index=index, action="surfaceUpdate", body=message["surfaceUpdate"])
            except A2uiInvalid as exc:
                raise A2uiInvalid(
                    f"A2UI message {index} ({action}): field /{action}/catalogId: surface {sid[:60]!r} was drawn before with "
                    f"components that {_label(catalog)} refuses: {exc.message}",
                    hint="delete the surface first (deleteSurface), or keep to a catalog its components fit",
                ) from None


_CLIENT: dict[str, Any] = {}


def check_client_message(message: Any) -> str:
    """An A2UI client-to-server message (what a person's action sends back: v0.9
    ``{"version": "v0.9", "action": ...}`` or ``"error"``, v0.8 ``{"userAction": ...}`` or
    ``"error"``) checked against its version's published schema; its version, or A2uiInvalid
    naming the field and the rule."""
    if not isinstance(message, Mapping):
        raise A2uiInvalid("an A2UI client message is a JSON object", hint="send the client-to-server message the renderer built")
    version = V09 if "version" in message else V08
    if version not in _CLIENT:
        from pincer.canvas.catalogs import shipped_schema

        path = "v0_9/client_to_server.json" if version == V09 else "v0_8/client_to_server.json"
        _CLIENT[version] = jsonschema_rs.validator_for(shipped_schema(path), validate_formats=True, retriever=no_retrieval)
    action = next((k for k in ("action", "userAction", "error") if k in message), "message")
    _check(_CLIENT[version], dict(message), index=0, action=action, prefix=[])
    return version
