"""A2UI catalogs: the components (and, in v0.9, functions) a surface may use, by the catalog its
``catalogId`` names.

Built in, shipped under ``schemas/`` (copied unchanged from ``@a2ui/web_core`` 0.11.0):

- v0.8's standard catalog, the catalog of a v0.8 surface whose ``beginRendering`` names none;
- v0.9's basic and minimal catalogs.

More come from ``[gateway] a2ui_catalogs``: files or https URLs of catalog documents, each of one
version: v0.9 (a JSON Schema 2020-12 document with ``catalogId``, ``components`` and the
``$defs`` the message schema refers to: ``anyComponent``, ``anyFunction``, ``theme``) or v0.8
(``catalogId`` and ``components``, one JSON Schema per component, and optional ``styles``). A
URL is fetched through the egress rule (https only; private addresses only with
``[network] allow_private``). A catalog document that refers to any schema outside itself and
A2UI's own is refused: nothing is ever fetched while validating.

Every check asserts ``format`` keywords (a ``uri`` that is not a URI fails), as the A2UI
specification's own test suite does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import anyio
import jsonschema_rs

from pincer.core.errors import A2uiInvalid, ConfigError

__all__ = [
    "Catalog",
    "CatalogSet",
    "load_catalog",
    "load_catalogs",
    "builtin_catalogs",
    "STANDARD_V08",
    "BASIC_V09",
    "MINIMAL_V09",
    "CATALOGS_KEY",
    "no_retrieval",
    "shipped_schema",
]

V08 = "v0.8"
V09 = "v0.9"
STANDARD_V08 = "https://a2ui.org/specification/v0_8/standard_catalog_definition.json"
BASIC_V09 = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
MINIMAL_V09 = "https://a2ui.org/specification/v0_9/catalogs/minimal/catalog.json"
CATALOGS_KEY = "[gateway] a2ui_catalogs"
V09_BASE = "https://a2ui.org/specification/v0_9/"
_V09_NEEDS = ("anyComponent", "anyFunction", "theme")


def no_retrieval(uri: str) -> Any:
    """The retriever of every validator: a schema is never fetched while validating."""
    raise ValueError(f"{uri} is neither A2UI's nor in this catalog: pincer fetches no schema while validating")


def shipped_schema(path: str) -> dict[str, Any]:
    """One of the A2UI schemas shipped under ``schemas/`` (``v0_9/client_to_server.json``...)."""
    return _shipped(path)


def _shipped(path: str) -> dict[str, Any]:
    text = resources.files("pincer.canvas").joinpath("schemas", path).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def v08_envelope() -> dict[str, Any]:
    """v0.8's message schema without a catalog (a component is any one-key object)."""
    return _shipped("v0_8/server_to_client.json")


@cache
def _v08_standard() -> dict[str, Any]:
    return _shipped("v0_8/server_to_client_with_standard_catalog.json")


@dataclass(frozen=True, kw_only=True, slots=True)
class Catalog:
    """One catalog: its id, the A2UI version it serves, its document, and where it came from."""

    catalog_id: str
    version: str
    document: Mapping[str, Any]
    source: str  # "built in", a file path or a URL
    # v0.8: the JSON Schema of each component's properties, and of beginRendering's styles
    components: Mapping[str, Any] = field(default_factory=dict)
    styles: Mapping[str, Any] | None = None

    @property
    def component_names(self) -> tuple[str, ...]:
        return tuple(self.components)

    @property
    def function_names(self) -> tuple[str, ...]:
        functions = self.document.get("functions")
        return tuple(functions) if isinstance(functions, Mapping) else ()


def _v09(document: Mapping[str, Any], source: str) -> Catalog:
    components = document.get("components")
    catalog_id = document.get("catalogId")
    if not isinstance(catalog_id, str) or not catalog_id:
        raise ValueError("a v0.9 catalog names itself in catalogId (a string)")
    if not isinstance(components, Mapping) or not components:
        raise ValueError("a v0.9 catalog has components (an object of component schemas)")
    defs = document.get("$defs")
    missing = [name for name in _V09_NEEDS if not isinstance(defs, Mapping) or name not in defs]
    if missing:
        raise ValueError(f"a v0.9 catalog defines $defs {', '.join(_V09_NEEDS)} (the message schema refers to them); missing: {', '.join(missing)}")
    return Catalog(catalog_id=catalog_id, version=V09, document=document, source=source, components=dict(components))


def _v08(document: Mapping[str, Any], source: str) -> Catalog:
    catalog_id = document.get("catalogId")
    components = document.get("components")
    if not isinstance(catalog_id, str) or not catalog_id:
        raise ValueError("a v0.8 catalog names itself in catalogId (a string)")
    if not isinstance(components, Mapping) or not components or not all(isinstance(s, Mapping) for s in components.values()):
        raise ValueError("a v0.8 catalog has components (an object: component name -> JSON Schema of its properties)")
    styles = document.get("styles")
    if styles is not None and not isinstance(styles, Mapping):
        raise ValueError("a v0.8 catalog's styles is an object: style name -> JSON Schema")
    style_schema = {"type": "object", "properties": dict(styles), "additionalProperties": False} if styles else None
    return Catalog(catalog_id=catalog_id, version=V08, document=document, source=source, components=dict(components), styles=style_schema)


@cache
def builtin_catalogs() -> tuple[Catalog, ...]:
    standard = _v08_standard()
    wrapper = standard["properties"]["surfaceUpdate"]["properties"]["components"]["items"]["properties"]["component"]
    styles = standard["properties"]["beginRendering"]["properties"]["styles"]
    return (
        Catalog(catalog_id=STANDARD_V08, version=V08, document=standard, source="built in", components=dict(wrapper["properties"]), styles=styles),
        _v09(_shipped("v0_9/basic_catalog.json"), "built in"),
        _v09(_shipped("v0_9/minimal_catalog.json"), "built in"),
    )


def load_catalog(text: str | bytes, source: str) -> Catalog:
    """A catalog document (JSON) as a Catalog, checked: its shape, and every schema in it
    compiles with nothing fetched. ConfigError naming ``source`` and what is wrong otherwise."""
    hint = f"fix the catalog, or remove it from {CATALOGS_KEY}"
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"A2UI catalog {source}: not JSON ({exc})", hint=hint) from None
    if not isinstance(document, dict):
        raise ConfigError(f"A2UI catalog {source}: a catalog is a JSON object", hint=hint)
    # v0.9 catalogs are JSON Schema documents of their own; v0.8's are plain maps of schemas.
    is_v09 = "$schema" in document or "$id" in document or "$defs" in document
    try:
        catalog = _v09(document, source) if is_v09 else _v08(document, source)
        CatalogSet([catalog]).compile(catalog)
    except ValueError as exc:
        raise ConfigError(f"A2UI catalog {source}: {exc}", hint=hint) from None
    return catalog


class CatalogSet:
    """The catalogs a canvas knows: the built-in ones and ``extra`` (a later one with the same id
    replaces an earlier one). Validators are compiled once per catalog and part."""

    def __init__(self, extra: Iterable[Catalog] = ()) -> None:
        self._by_id: dict[str, Catalog] = {}
        for catalog in (*builtin_catalogs(), *extra):
            self._by_id[catalog.catalog_id] = catalog
        self._validators: dict[tuple[str, str], Any] = {}
        self._registries: dict[str, jsonschema_rs.Registry] = {}

    def __contains__(self, catalog_id: object) -> bool:
        return catalog_id in self._by_id

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._by_id)

    def find(self, version: str, catalog_id: str | None) -> Catalog | None:
        """The catalog a surface of ``version`` names (None for v0.8: the standard one)."""
        wanted = catalog_id if catalog_id is not None else STANDARD_V08 if version == V08 else None
        catalog = self._by_id.get(wanted) if wanted is not None else None
        return catalog if catalog is not None and catalog.version == version else None

    def known(self, version: str) -> tuple[str, ...]:
        return tuple(c.catalog_id for c in self._by_id.values() if c.version == version)

    def compile(self, catalog: Catalog) -> None:
        """Compile every part of ``catalog`` now (a bad catalog fails where it is loaded)."""
        if catalog.version == V09:
            self._registry(catalog)
        else:
            for name in catalog.components:
                self.validator(catalog, f"components/{name}")
            if catalog.styles is not None:
                self.validator(catalog, "styles")

    def _registry(self, catalog: Catalog) -> jsonschema_rs.Registry:
        registry = self._registries.get(catalog.catalog_id)
        if registry is None:
            document = dict(catalog.document)
            # server_to_client.json refers to "catalog.json": the catalog of this surface.
            as_catalog = {**document, "$id": V09_BASE + "catalog.json"}
            resources_ = [
                (V09_BASE + "server_to_client.json", _shipped("v0_9/server_to_client.json")),
                (V09_BASE + "common_types.json", _shipped("v0_9/common_types.json")),
                (V09_BASE + "catalog.json", as_catalog),
            ]
            own_id = document.get("$id")
            if isinstance(own_id, str) and own_id and own_id != V09_BASE + "catalog.json":
                resources_.append((own_id, document))
            registry = self._registries[catalog.catalog_id] = jsonschema_rs.Registry(resources_, retriever=no_retrieval)
        return registry

    def validator(self, catalog: Catalog, part: str) -> Any:
        """A compiled validator: for v0.9 ``part`` is a reference into the message schema
        (``server_to_client.json#/$defs/...``) or the catalog (``catalog.json#/...``); for v0.8
        ``components/NAME`` or ``styles``."""
        key = (catalog.catalog_id, part)
        found = self._validators.get(key)
        if found is None:
            if catalog.version == V09:
                found = jsonschema_rs.validator_for(
                    {"$ref": V09_BASE + part}, registry=self._registry(catalog), validate_formats=True, retriever=no_retrieval
                )
            else:
                schema = catalog.styles if part == "styles" else catalog.components[part.removeprefix("components/")]
                found = jsonschema_rs.validator_for(dict(schema or {}), validate_formats=True, retriever=no_retrieval)
            self._validators[key] = found
        return found


@cache
def default_catalogs() -> CatalogSet:
    """The built-in catalogs alone."""
    return CatalogSet()


def unknown_catalog(index: int, action: str, field_path: str, catalog_id: str, known: Sequence[str]) -> A2uiInvalid:
    """The refusal of a surface that names a catalog this canvas does not know."""
    return A2uiInvalid(
        f"A2UI message {index} ({action}): field {field_path}: unknown catalog {catalog_id[:120]!r} "
        f"(rule: a catalog this canvas knows: {', '.join(known)})",
        hint=f"use one of those, or register the catalog's file or https URL in {CATALOGS_KEY} in config.toml",
    )


MAX_CATALOG_BYTES = 4_194_304


async def _fetch(url: str, *, allow_private: bool) -> bytes:
    """A catalog URL's body, through the egress rule: https (plain http to loopback only with
    ``[network] allow_private``), the URL's own host, no private or metadata address."""
    from pincer.core.errors import EgressDenied, PincerError
    from pincer.safety import egress

    hint = f"give an https URL whose host resolves to a public address, or a file, in {CATALOGS_KEY}"
    try:
        target = egress.check_url(url, allow_plain_http=allow_private)
        policy = egress.EgressPolicy.from_hosts(
            [target.authority], allow_private_network=allow_private, allow_plain_http_loopback=allow_private, max_response_bytes=MAX_CATALOG_BYTES
        )
        response = await egress.send(egress.HttpRequest(method="GET", url=url, headers=(("Accept", "application/json"),)), policy=policy)
    except EgressDenied as exc:
        raise ConfigError(f"A2UI catalog {url}: the egress rule refuses it: {exc.message}", hint=exc.hint or hint) from None
    except PincerError as exc:
        raise ConfigError(f"A2UI catalog {url}: could not fetch it: {exc.message}", hint=hint) from None
    if response.status != 200:
        raise ConfigError(f"A2UI catalog {url}: the server answered HTTP {response.status}", hint=hint)
    if response.truncated:
        raise ConfigError(f"A2UI catalog {url}: larger than {MAX_CATALOG_BYTES} bytes", hint=hint)
    return response.body


def _read_file(source: str, home: Any) -> bytes:
    from pathlib import Path

    path = Path(source).expanduser()
    path = path if path.is_absolute() else Path(home) / path
    try:
        if path.stat().st_size > MAX_CATALOG_BYTES:
            raise ConfigError(f"A2UI catalog {path}: larger than {MAX_CATALOG_BYTES} bytes", hint=f"remove it from {CATALOGS_KEY}")
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"A2UI catalog {path}: cannot read it ({exc.strerror})", hint=f"fix the path in {CATALOGS_KEY} (relative paths start at the pincer home)"
        ) from None


async def load_catalogs(sources: Sequence[str], *, home: Any, allow_private: bool) -> CatalogSet:
    """The built-in catalogs and those ``sources`` name (``[gateway] a2ui_catalogs``: files,
    relative to the pincer home, or URLs). ConfigError for the first that cannot be had."""
    extra = []
    for source in sources:
        if source.startswith(("https://", "http://")):
            text: str | bytes = await _fetch(source, allow_private=allow_private)
        else:
            text = await anyio.to_thread.run_sync(_read_file, source, home)
        extra.append(load_catalog(text, source))
    return CatalogSet(extra)
