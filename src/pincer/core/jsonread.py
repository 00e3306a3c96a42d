"""Reading typed values out of untrusted JSON, with errors that name the file and the key.

Manifests (capabilities files, registry entries, server lists) share one way of being read: a
``null`` counts as absent (as serde's ``Option`` does), unknown keys are ignored, and a known key
holding the wrong shape raises :class:`ManifestError` with the dotted key path (``http.allowlist[0].host``)
and what was expected. The reader never echoes a value back, only its JSON type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

from pincer.core.errors import ManifestError

__all__ = ["JsonReader", "key_at", "json_kind"]


def json_kind(value: object) -> str:
    """A value's type in JSON's words, for messages: never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def key_at(parent: str, name: str | int) -> str:
    """The dotted path of ``name`` inside ``parent``: ``a.b``, ``a[0]``."""
    if isinstance(name, int):
        return f"{parent}[{name}]"
    return f"{parent}.{name}" if parent else name


class JsonReader:
    """Reads one document from ``source``; each ``at`` argument is the dotted path of the parent."""

    def __init__(self, source: str) -> None:
        self.source = source

    def load(self, data: str | bytes | bytearray | Mapping[str, Any]) -> Mapping[str, Any]:
        """Decode JSON text or bytes (UTF-8/16/32) unless already decoded; the top must be an object."""
        if isinstance(data, (str, bytes, bytearray)):
            try:
                data = json.loads(data)
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, deep nesting
                detail = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
                raise ManifestError(f"not valid JSON: {detail}", source=self.source,
                                    hint="fix the file so it holds one JSON object") from None  # fmt: skip
        if not isinstance(data, Mapping):
            raise ManifestError(f"expected a JSON object at the top, got {json_kind(data)}", source=self.source)
        return data

    def fail(self, at: str, expected: str, got: object = ..., hint: str | None = None) -> NoReturn:
        message = f"expected {expected}" + ("" if got is ... else f", got {json_kind(got)}")
        raise ManifestError(message, source=self.source, key=at, hint=hint)

    def text(self, m: Mapping[str, Any], name: str, at: str, *, required: bool = False) -> str | None:
        value = m.get(name)
        if value is None:
            if required:
                self.fail(key_at(at, name), "a string (it is required)")
            return None
        if not isinstance(value, str):
            self.fail(key_at(at, name), "a string", value)
        if required and not value.strip():
            self.fail(key_at(at, name), "a non-empty string")
        return value

    def number(self, m: Mapping[str, Any], name: str, at: str, default: int, *, minimum: int = 0) -> int:
        value = m.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(key_at(at, name), f"a whole number >= {minimum}", value)
        return value

    def flag(self, m: Mapping[str, Any], name: str, at: str, default: bool = False) -> bool:
        value = m.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key_at(at, name), "true or false", value)
        return value

    def obj(self, value: Any, at: str, what: str = "an object") -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(at, what, value)
        return value

    def section(self, m: Mapping[str, Any], name: str, at: str) -> Mapping[str, Any] | None:
        value = m.get(name)
        return None if value is None else self.obj(value, key_at(at, name))

    def items(self, m: Mapping[str, Any], name: str, at: str, what: str) -> list[tuple[str, Any]]:
        """The entries of a list as (path, item) pairs; absent -> []."""
        value = m.get(name)
        if value is None:
            return []
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            self.fail(key_at(at, name), what, value)
        return [(key_at(key_at(at, name), i), item) for i, item in enumerate(value)]

    def texts(self, m: Mapping[str, Any], name: str, at: str) -> tuple[str, ...]:
        out = []
        for where, item in self.items(m, name, at, "a list of strings"):
            if not isinstance(item, str):
                self.fail(where, "a string", item)
            out.append(item)
        return tuple(out)

    def text_map(self, m: Mapping[str, Any], name: str, at: str) -> dict[str, str]:
        value = m.get(name)
        if value is None:
            return {}
        value = self.obj(value, key_at(at, name), "an object of string values")
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                self.fail(key_at(key_at(at, name), str(key)), "a string", item)
        return dict(value)
