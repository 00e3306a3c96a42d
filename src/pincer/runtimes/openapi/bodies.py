"""Request bodies: which of an operation's media types a tool sends, and how its ``body``
argument becomes bytes.

One media type per operation, the first of: JSON (``application/json``, ``*/*+json``), a form
(``application/x-www-form-urlencoded``), ``multipart/form-data``, text (``text/*``, XML), and
anything else as raw bytes (``application/octet-stream``, ``image/png``, ``*/*``).

* JSON: the argument as JSON.
* Form: each property by its ``encoding`` entry (``style``/``explode``/``allowReserved`` as for a
  query parameter, or ``contentType``: the value as that media type, JSON for a JSON type).
* Multipart: one part per property (an array: one part per item), ``contentType`` from the
  ``encoding`` entry or the spec's default (``text/plain`` for a primitive, ``application/json``
  for an object). A property that is a file (``format: binary``, or 3.1's ``contentMediaType``
  without ``contentEncoding``) takes a *file argument*: ``{"path": "in/the/workspace.png"}``,
  read under the file tools' rules, or ``{"base64": "..."}``, with optional ``filename`` and
  ``content_type``. ``encoding.headers`` are not sent.
* Raw bytes: the body argument is a file argument.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.core.errors import UsageError
from pincer.runtimes.openapi.serialize import encode, query_pairs, scalar_text

__all__ = ["PartEncoding", "RequestBody", "FILE_SCHEMA", "media_kind", "choose_media", "is_binary_schema",
           "encode_body", "FileReader"]

# path -> (file name, bytes): the runtime's reader, which applies the file tools' rules.
FileReader = Callable[[str], tuple[str, bytes]]

FILE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "A file: 'path' names a file in the workspace (read under the file tools' rules), or "
    "'base64' gives its bytes; 'filename' and 'content_type' override what is sent.",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "base64": {"type": "string", "contentEncoding": "base64"},
        "filename": {"type": "string", "minLength": 1, "maxLength": 255},
        "content_type": {"type": "string", "pattern": r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$"},
    },
    "oneOf": [{"required": ["path"]}, {"required": ["base64"]}],
    "additionalProperties": False,
}
_KIND_ORDER = ("json", "form", "multipart", "text", "binary")


@dataclass(frozen=True, kw_only=True, slots=True)
class PartEncoding:
    """One property's ``encoding`` entry of a form or multipart body."""

    content_type: str | None = None
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("content_type", self.content_type), ("style", self.style),
                                  ("explode", self.explode), ("allow_reserved", self.allow_reserved)) if v}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartEncoding:
        return cls(content_type=data.get("content_type"), style=data.get("style"), explode=data.get("explode"),
                   allow_reserved=bool(data.get("allow_reserved")))


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestBody:
    media_type: str  # as the document writes it
    kind: str  # json | form | multipart | text | binary
    required: bool = False
    encoding: Mapping[str, PartEncoding] = field(default_factory=dict)
    files: Mapping[str, bool] = field(default_factory=dict)  # multipart property -> is an array of files

    @property
    def reads_files(self) -> bool:
        return self.kind == "binary" or bool(self.files)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"media_type": self.media_type, "kind": self.kind, "required": self.required}
        if self.encoding:
            data["encoding"] = {k: v.to_json() for k, v in self.encoding.items()}
        if self.files:
            data["files"] = dict(self.files)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestBody:
        return cls(
            media_type=data["media_type"], kind=data["kind"], required=bool(data.get("required")),
            encoding={k: PartEncoding.from_json(v) for k, v in (data.get("encoding") or {}).items()},
            files={k: bool(v) for k, v in (data.get("files") or {}).items()},
        )


def _bare(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def media_kind(media_type: str) -> str:
    bare = _bare(media_type)
    if bare in ("application/json", "text/json") or bare.endswith("+json"):
        return "json"
    if bare == "application/x-www-form-urlencoded":
        return "form"
    if bare == "multipart/form-data":
        return "multipart"
    if bare.startswith("text/") or bare in ("application/xml", "application/yaml") or bare.endswith("+xml"):
        return "text"
    return "binary"


def choose_media(content: Mapping[str, Any]) -> tuple[str, str] | None:
    """(media type, kind) of the one a tool sends, or None for an empty ``content``."""
    candidates = [(str(t), media_kind(str(t))) for t in content]
    if not candidates:
        return None

    def rank(item: tuple[str, str]) -> tuple[int, int]:
        media, kind = item
        return _KIND_ORDER.index(kind), 0 if _bare(media) == "application/json" else 1

    return min(candidates, key=rank)


def is_binary_schema(schema: Any) -> bool:
    """A file in a multipart body: 3.0's ``format: binary``, 3.1's ``contentMediaType`` without
    ``contentEncoding`` (bytes as they are)."""
    if not isinstance(schema, Mapping):
        return False
    if schema.get("format") == "binary":
        return True
    return "contentMediaType" in schema and "contentEncoding" not in schema and schema.get("type") in (None, "string")


# ------------------------------------------------------------------------------------- encoding


def _file(value: Any, read: FileReader, what: str) -> tuple[str, bytes, str | None]:
    if not isinstance(value, Mapping):
        raise UsageError(f"{what} must be a file argument", hint='{"path": "file/in/the/workspace"} or {"base64": "..."}')
    if isinstance(value.get("path"), str):
        name, data = read(value["path"])
    elif isinstance(value.get("base64"), str):
        try:
            data = base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise UsageError(f"{what}: 'base64' is not valid base64", hint="encode the bytes with standard base64") from None
        name = "file"
    else:
        raise UsageError(f"{what} needs 'path' or 'base64'", hint='{"path": "file/in/the/workspace"}')
    given_name, given_type = value.get("filename"), value.get("content_type")
    return (given_name if isinstance(given_name, str) else name, data,
            given_type if isinstance(given_type, str) else None)


def _concrete(media_type: str | None) -> str | None:
    # A wildcard or a list ("image/png, image/jpeg": encoding.contentType allows one) names no
    # one type to send.
    return media_type if media_type and "*" not in media_type and "," not in media_type else None


def _as_media(value: Any, media_type: str) -> bytes:
    if media_kind(media_type) == "json":
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return scalar_text(value).encode("utf-8")


def _form(spec: RequestBody, value: Any) -> bytes:
    if not isinstance(value, Mapping):
        raise UsageError("a form body must be an object", hint="pass body as an object of fields")
    pairs: list[str] = []
    for prop, item in value.items():
        enc = spec.encoding.get(prop, PartEncoding())
        if enc.content_type:
            pairs.append(f"{encode(prop)}={encode(_as_media(item, enc.content_type).decode('utf-8'))}")
            continue
        style = enc.style or "form"
        explode = enc.explode if enc.explode is not None else style == "form"
        pairs.extend(query_pairs(style, explode, prop, item, allow_reserved=enc.allow_reserved))
    return "&".join(pairs).encode("ascii")


def _multipart(spec: RequestBody, value: Any, read: FileReader) -> tuple[bytes, str]:
    # httpx2's RFC 7578 encoder (the MCP SDK's client, so no second HTTP library for it): parts
    # in the order given, a filename only on file parts, a Content-Type only where one is set
    from httpx2 import Request

    if not isinstance(value, Mapping):
        raise UsageError("a multipart body must be an object", hint="pass body as an object of parts")
    parts: list[tuple[str, tuple[str | None, bytes, str | None]]] = []
    for prop, item in value.items():
        enc = spec.encoding.get(prop, PartEncoding())
        if prop in spec.files:
            many = spec.files[prop]
            items = item if many and isinstance(item, list) else [item]
            for index, one in enumerate(items):
                filename, data, given_type = _file(one, read, f"body.{prop}" + (f"[{index}]" if many else ""))
                parts.append((prop, (filename, data, given_type or _concrete(enc.content_type)
                                     or mimetypes.guess_type(filename)[0] or "application/octet-stream")))
            continue
        for one in item if isinstance(item, list) else [item]:
            content_type = enc.content_type or ("application/json" if isinstance(one, Mapping | list) else None)
            # none: RFC 7578's default, text/plain
            parts.append((prop, (None, _as_media(one, content_type or "text/plain"), content_type)))
    encoded = Request("POST", "http://multipart.invalid/", files=parts)
    return encoded.read(), encoded.headers["Content-Type"]


def encode_body(spec: RequestBody, value: Any, read: FileReader) -> tuple[bytes, str]:
    """The body's bytes and its Content-Type."""
    if spec.kind == "json":
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"), spec.media_type
    if spec.kind == "form":
        return _form(spec, value), "application/x-www-form-urlencoded"
    if spec.kind == "multipart":
        return _multipart(spec, value, read)
    if spec.kind == "text":
        if not isinstance(value, str):
            raise UsageError(f"the {spec.media_type} body must be a string", hint="pass body as text")
        return value.encode("utf-8"), _concrete(spec.media_type) or "text/plain; charset=utf-8"
    filename, data, given_type = _file(value, read, "body")
    return data, (given_type or _concrete(spec.media_type) or mimetypes.guess_type(filename)[0]
                  or "application/octet-stream")
