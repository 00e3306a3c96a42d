"""Loading an OpenAPI 3.0 / 3.1 document and following its ``$ref``s.

``load_document(source)`` reads a file or an http(s) URL, JSON or YAML. ``Resolver`` follows
local refs (``#/components/schemas/Pet``) and refs relative to the referring document
(``schemas.yaml#/Pet``, ``../common.json``); refs to other hosts are refused rather than
fetched. ``Resolver.schema()`` turns an OpenAPI schema into plain JSON Schema 2020-12: every
referenced schema moves into ``$defs`` once (so recursive schemas stay finite), 3.0's
``nullable`` and boolean ``exclusiveMinimum``/``exclusiveMaximum`` become their 2020-12 forms,
and OpenAPI-only keywords are dropped. Schemas are converted for what a caller sends: a
``readOnly`` property (an ``id`` the server assigns) is left out, and out of ``required``.

A document may be at most ``[openapi] max_document_bytes`` (64 MiB unless set; GitHub's own
description is 13 MB); each document it refers to, too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from pincer.core.errors import ManifestError

__all__ = ["Location", "load_document", "parse_text", "Resolver", "MAX_DOCUMENT_BYTES", "MAX_REF_DEPTH"]

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # the default of [openapi] max_document_bytes
MAX_REF_DEPTH = 64
MAX_DOCUMENTS = 64
MAX_SCHEMA_NODES = 200_000  # YAML aliases can make a small file a huge tree: stop walking there
_DOC_SUFFIXES = (".json", ".yaml", ".yml")
_OPENAPI_ONLY = frozenset({"discriminator", "xml", "externalDocs", "example", "nullable"})
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]")

Location = Path | str  # a file, or an http(s) URL
Fetch = Callable[[str], bytes]


def too_large(limit: int, source: str) -> ManifestError:
    return ManifestError(
        f"larger than {limit} bytes, the most pincer reads of an OpenAPI document",
        source=source,
        hint="raise [openapi] max_document_bytes in config.toml",
    )


def parse_text(raw: bytes, *, source: str, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """JSON, else YAML (safe loader). Raises ManifestError naming the source."""
    if len(raw) > limit:
        raise too_large(limit, source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError("not UTF-8 text", source=source) from None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"not valid JSON: {exc.msg} at line {exc.lineno}", source=source) from None
    import yaml  # only for YAML documents: reading services.json must not pay for it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ManifestError(f"not valid JSON or YAML{where}", source=source) from None
    except RecursionError:
        raise ManifestError("nested too deeply", source=source) from None


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def load_document(
    source: str | Path, *, fetch: Fetch | None = None, limit: int = MAX_DOCUMENT_BYTES
) -> tuple[Mapping[str, Any], Location]:
    """The parsed root document and where it came from."""
    location: Location = source if isinstance(source, str) and _is_url(source) else Path(source).resolve()
    data = _read(location, fetch, limit)
    if not isinstance(data, Mapping):
        raise ManifestError("expected an OpenAPI document (an object)", source=str(location))
    version = data.get("openapi")
    if not isinstance(version, str) or not re.match(r"^3\.[01]\.", version):
        hint = "Swagger 2.0 documents need converting to OpenAPI 3 first" if "swagger" in data else None
        raise ManifestError(
            f"unsupported 'openapi' version {version!r}; pincer reads 3.0.x and 3.1.x", source=str(location), hint=hint
        )
    return data, location


def _read(location: Location, fetch: Fetch | None, limit: int) -> Any:
    if isinstance(location, Path):
        try:
            with location.open("rb") as handle:
                raw = handle.read(limit + 1)
        except FileNotFoundError:
            raise ManifestError("the file does not exist", source=str(location)) from None
        except OSError as exc:
            raise ManifestError(f"cannot read the file: {exc.strerror}", source=str(location)) from None
    else:
        if fetch is None:
            raise ManifestError("fetching documents from URLs is not enabled here", source=location)
        raw = fetch(location)
    return parse_text(raw, source=str(location), limit=limit)


def _pointer(document: Any, pointer: str, *, source: str) -> Any:
    if pointer in ("", "/"):
        return document
    if not pointer.startswith("/"):
        raise ManifestError(f"$ref fragment {pointer!r} is not a JSON pointer", source=source)
    node = document
    for raw_part in pointer[1:].split("/"):
        part = unquote(raw_part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ManifestError(f"$ref #{pointer} points at nothing", source=source)
    return node


class Resolver:
    """Follows refs across one root document and the files it refers to."""

    def __init__(
        self, root: Mapping[str, Any], location: Location, *, fetch: Fetch | None = None,
        limit: int = MAX_DOCUMENT_BYTES,
    ) -> None:
        self.root = root
        self.location = location
        self._fetch = fetch
        self._limit = limit
        self.for_request = True  # readOnly properties are left out (module doc)
        self.memo: dict[int, Any] = {}  # per-document results keyed by node (operations._prune_tree)
        self.dropped: list[str] = []  # what the conversion left out, for the caller's notes
        self._patterns: dict[str, str | None] = {}
        self._docs: dict[str, Any] = {self._key(location): root}
        self.defs: dict[str, Any] = {}
        self._def_names: dict[tuple[str, str], str] = {}
        self._nodes_left = MAX_SCHEMA_NODES

    def reset_defs(self) -> None:
        """Start a new tool's schema: its ``$defs`` hold only what it uses."""
        self.defs = {}
        self._def_names = {}

    @staticmethod
    def _key(location: Location) -> str:
        return str(location)

    def _target(self, ref: str, base: Location) -> tuple[Location, str]:
        file_part, _, fragment = ref.partition("#")
        if not file_part:
            return base, fragment
        if _is_url(file_part) or file_part.startswith("//"):
            if isinstance(base, str) and urlsplit(urljoin(base, file_part)).netloc == urlsplit(base).netloc:
                return urljoin(base, file_part), fragment
            raise ManifestError(f"$ref {ref!r} points to another host; remote refs are not followed", source=str(base))
        if isinstance(base, str):
            return urljoin(base, file_part), fragment
        target = (base.parent / unquote(file_part)).resolve()
        if target.suffix.lower() not in _DOC_SUFFIXES:
            raise ManifestError(f"$ref {ref!r} names a file that is not .json, .yaml or .yml", source=str(base))
        return target, fragment

    def resolve(self, ref: Any, base: Location) -> tuple[Any, Location]:
        """The value a ``$ref`` points at, and the document it lives in (for nested refs)."""
        if not isinstance(ref, str):
            raise ManifestError(f"$ref must be a string, got {type(ref).__name__}", source=str(base))
        location, fragment = self._target(ref, base)
        key = self._key(location)
        if key not in self._docs:
            if len(self._docs) >= MAX_DOCUMENTS:
                raise ManifestError(f"more than {MAX_DOCUMENTS} documents are referenced", source=str(base))
            self._docs[key] = _read(location, self._fetch, self._limit)
        return _pointer(self._docs[key], fragment, source=str(location)), location

    def deref(self, value: Any, base: Location) -> tuple[Any, Location]:
        """Follow a chain of ``$ref`` objects (parameters, request bodies) to the real object."""
        for _ in range(MAX_REF_DEPTH):
            if isinstance(value, Mapping) and "$ref" in value:
                value, base = self.resolve(value["$ref"], base)
            else:
                return value, base
        raise ManifestError("a $ref chain is longer than allowed (a loop?)", source=str(base))

    # -- schemas -----------------------------------------------------------------------------

    def schema(self, value: Any, base: Location, *, depth: int = 0) -> Any:
        """OpenAPI schema -> JSON Schema 2020-12 with refs moved into ``self.defs``."""
        if depth > MAX_REF_DEPTH:
            raise ManifestError("a schema is nested too deeply", source=str(base))
        self._nodes_left -= 1
        if self._nodes_left < 0:
            raise ManifestError(f"the schemas hold more than {MAX_SCHEMA_NODES} nodes", source=str(base))
        if isinstance(value, bool):
            return value
        if value is None:  # `schema: null`, as some published documents write "any": taken as {}
            return {}
        if not isinstance(value, Mapping):
            raise ManifestError(f"expected a schema object, got {type(value).__name__}", source=str(base))
        if "$ref" in value:
            name = self._define(value["$ref"], base, depth)
            siblings = {k: v for k, v in value.items() if k != "$ref"}
            converted = self._convert(siblings, base, depth) if siblings else {}
            return {"$ref": f"#/$defs/{name}", **converted}
        return self._convert(value, base, depth)

    def _define(self, ref: str, base: Location, depth: int) -> str:
        location, fragment = self._target(ref, base)
        key = (self._key(location), fragment)
        name = self._def_names.get(key)
        if name is not None:
            return name
        stem = _NOT_NAME.sub("_", fragment.rsplit("/", 1)[-1] or Path(str(location)).stem) or "schema"
        name, n = stem, 2
        while name in self.defs:
            name, n = f"{stem}_{n}", n + 1
        self._def_names[key] = name
        self.defs[name] = {}  # placeholder: a recursive schema refers back to this name
        target, target_base = self.resolve(ref, base)
        self.defs[name] = self.schema(target, target_base, depth=depth + 1)
        return name

    def _pattern_problem(self, pattern: str) -> str | None:
        if pattern not in self._patterns:
            from pincer.core.schema import schema_problem

            self._patterns[pattern] = schema_problem({"pattern": pattern})
        return self._patterns[pattern]

    def _read_only(self, value: Any, base: Location) -> bool:
        """A property the server sets (``readOnly``, on the property or the schema it names)."""
        try:
            target, _ = self.deref(value, base)
        except ManifestError:
            return False
        return bool(isinstance(value, Mapping) and value.get("readOnly") is True) or (
            isinstance(target, Mapping) and target.get("readOnly") is True)

    def _convert(self, value: Mapping[str, Any], base: Location, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str) or key in _OPENAPI_ONLY or key.startswith("x-"):
                continue
            if key == "properties":
                if isinstance(item, Mapping):
                    out[key] = {str(k): self.schema(v, base, depth=depth + 1) for k, v in item.items()
                                if not (self.for_request and self._read_only(v, base))}
            elif key in ("patternProperties", "$defs", "definitions", "dependentSchemas"):
                if isinstance(item, Mapping):
                    out[key] = {str(k): self.schema(v, base, depth=depth + 1) for k, v in item.items()}
            elif key in ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
                         "unevaluatedItems", "unevaluatedProperties", "additionalItems"):
                if isinstance(item, list):  # draft-4 style tuple items
                    out["prefixItems" if key == "items" else key] = [self.schema(v, base, depth=depth + 1) for v in item]
                else:
                    out[key] = self.schema(item, base, depth=depth + 1)
            elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
                if isinstance(item, list):
                    out[key] = [self.schema(v, base, depth=depth + 1) for v in item]
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(item, bool):
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                if item and isinstance(value.get(bound), (int, float)):
                    out[key] = value[bound]
            elif key == "pattern" and isinstance(item, str) and (problem := self._pattern_problem(item)):
                # An ECMA-262 pattern pincer's validator (Rust regex) cannot read, such as a bare
                # "{": left out, so the tool stays callable; the API still checks its own pattern.
                self.dropped.append(f"pattern {item!r} left out ({problem}); the API still checks it")
            else:
                out[key] = item
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value.get(key) is True and bound in out:
                del out[bound]
        if self.for_request and isinstance(out.get("required"), list) and isinstance(value.get("properties"), Mapping):
            hidden = {str(k) for k, v in value["properties"].items() if self._read_only(v, base)}
            if hidden:
                out["required"] = [r for r in out["required"] if r not in hidden]
                if not out["required"]:
                    del out["required"]
        if value.get("nullable") is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif isinstance(kind, list) and "null" not in kind:
                out["type"] = [*kind, "null"]
            elif kind is None:
                out = {"anyOf": [out, {"type": "null"}]}
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        return out
