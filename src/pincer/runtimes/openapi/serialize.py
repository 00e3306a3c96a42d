"""Parameter serialization as the OpenAPI Specification writes it (3.0.4 / 3.1.1, "Style Values"
and "Style Examples"): ``matrix``, ``label`` and ``simple`` in paths, ``form``,
``spaceDelimited``, ``pipeDelimited`` and ``deepObject`` in queries, ``simple`` in headers and
``form`` in cookies, each with and without ``explode``, and ``allowReserved``.

``matrix``, ``label``, ``simple`` and ``form`` are RFC 6570's ``{;x}``, ``{.x}``, ``{x}`` and
``{?x}`` expansions: values are percent-encoded except RFC 3986's unreserved characters, and the
delimiters the style adds (``,`` ``;`` ``.`` ``=`` ``&``) are not. Object members keep the order
the caller gave them in (the spec's table: ``R,100,G,200,B,150``).

What the spec leaves undefined, done one stated way (docs/openapi.md):
* a value nested in an array or object (an array of objects) is sent as compact JSON text;
* ``deepObject`` nests: ``{"a": {"b": 1}}`` is ``color[a][b]=1``; an array member repeats the key;
* ``spaceDelimited``/``pipeDelimited`` with ``explode: true``, a primitive under them, or an
  array under ``deepObject``, are sent as ``form`` with the same ``explode`` (RFC 6570 has nothing else);
* headers are not percent-encoded (RFC 9110 field values), except the characters a field value
  cannot carry (controls, including CR and LF, and non-ASCII), which are, so a value can never
  end the header or start another;
* cookies are ``form`` with ``; `` between exploded pairs (3.1.1 Appendix D), percent-encoded.

Nothing here does I/O; the functions are pure and total over JSON values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

__all__ = [
    "STYLES",
    "DEFAULT_STYLE",
    "check_style",
    "encode",
    "path_value",
    "query_pairs",
    "header_value",
    "cookie_pairs",
    "protect_dot_segments",
]

# The styles each location allows (3.1.1 "Style Values").
STYLES: Mapping[str, tuple[str, ...]] = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
DEFAULT_STYLE: Mapping[str, str] = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}

# RFC 3986 reserved characters kept by allowReserved, less those a query string or a form body
# gives a meaning of its own ('[', ']', '#', '&', '=', '+'): 3.1.1 says applications must
# still percent-encode those.
_RESERVED_KEPT = ":/?@!$'()*,;"
_TRIPLE = re.compile(r"%[0-9A-Fa-f]{2}")
_DELIMITERS = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}


def check_style(location: str, style: str) -> str | None:
    """Why ``style`` cannot be used ``in: location``, or None when it can."""
    allowed = STYLES.get(location)
    if allowed is None:
        return f"'in' must be path, query, header or cookie, not {location!r}"
    if style not in allowed:
        return f"style {style!r} is not defined for {location} parameters (allowed: {', '.join(allowed)})"
    return None


def scalar_text(value: Any) -> str:
    """A JSON value as the text a style writes: ``true``/``false``, ``""`` for null, numbers as
    JSON writes them, strings as they are, anything nested as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode(text: str, *, allow_reserved: bool = False) -> str:
    """Percent-encode all but RFC 3986's unreserved characters; with ``allow_reserved`` also keep
    the reserved ones a query may carry, and percent-encoded triples as they are (RFC 6570 ``{+x}``)."""
    if not allow_reserved:
        return quote(text, safe="")
    out: list[str] = []
    pos = 0
    for match in _TRIPLE.finditer(text):
        out.append(quote(text[pos : match.start()], safe=_RESERVED_KEPT))
        out.append(match.group())
        pos = match.end()
    out.append(quote(text[pos:], safe=_RESERVED_KEPT))
    return "".join(out)


def _items(value: Any) -> list[str] | None:
    return [scalar_text(v) for v in value] if isinstance(value, list) else None


def _members(value: Any) -> list[tuple[str, str]] | None:
    return [(str(k), scalar_text(v)) for k, v in value.items()] if isinstance(value, Mapping) else None


def _joined_members(members: Iterable[tuple[str, str]], pair: str, sep: str, enc: Any) -> str:
    return sep.join(f"{enc(k)}{pair}{enc(v)}" for k, v in members)


# ------------------------------------------------------------------------------------- path


def path_value(style: str, explode: bool, name: str, value: Any) -> str:
    """What replaces ``{name}`` in the path template."""
    items, members = _items(value), _members(value)
    if style == "label":
        if items is not None:
            return "." + ("." if explode else ",").join(encode(i) for i in items) if items else ""
        if members is not None:
            if not members:
                return ""
            return "." + (_joined_members(members, "=", ".", encode) if explode
                          else _joined_members(members, ",", ",", encode))
        return "." + encode(scalar_text(value))
    if style == "matrix":
        key = encode(name)

        def one(text: str, label: str = key) -> str:
            return f";{label}" if text == "" else f";{label}={encode(text)}"

        if items is not None:
            if not items:
                return ""
            return "".join(one(i) for i in items) if explode else f";{key}=" + ",".join(encode(i) for i in items)
        if members is not None:
            if not members:
                return ""
            if explode:
                return "".join(one(v, encode(k)) for k, v in members)
            return f";{key}=" + _joined_members(members, ",", ",", encode)
        return one(scalar_text(value))
    # simple
    if items is not None:
        return ",".join(encode(i) for i in items)
    if members is not None:
        return _joined_members(members, "=" if explode else ",", ",", encode)
    return encode(scalar_text(value))


def protect_dot_segments(path: str) -> str:
    """Percent-encode the dots of a path segment that is only dots: a value of ``..`` must reach
    the server as data, never be resolved (by a client, a proxy or the server) as "one up"."""
    return "/".join(seg.replace(".", "%2E") if seg and set(seg) == {"."} else seg for seg in path.split("/"))


# ------------------------------------------------------------------------------------- query


def query_pairs(style: str, explode: bool, name: str, value: Any, *, allow_reserved: bool = False) -> list[str]:
    """The ``key=value`` pieces of the query string (already encoded), in order."""

    def enc(text: str) -> str:
        return encode(text, allow_reserved=allow_reserved)

    items, members = _items(value), _members(value)
    key = enc(name)
    if style == "deepObject" and isinstance(value, Mapping):
        return _deep_pairs(f"{name}", value, enc)
    delimiter = _DELIMITERS.get(style)
    if delimiter is not None and not explode:
        if items is not None:
            return [f"{key}=" + delimiter.join(enc(i) for i in items)] if items else []
        if members is not None:
            return [f"{key}=" + _joined_members(members, delimiter, delimiter, enc)] if members else []
    # form (and what the other styles leave undefined, as form)
    if items is not None:
        return [f"{key}={enc(i)}" for i in items] if explode else ([f"{key}=" + ",".join(enc(i) for i in items)] if items else [])
    if members is not None:
        if explode:
            return [f"{enc(k)}={enc(v)}" for k, v in members]
        return [f"{key}=" + _joined_members(members, ",", ",", enc)] if members else []
    return [f"{key}={enc(scalar_text(value))}"]


def _deep_pairs(prefix: str, value: Any, enc: Any) -> list[str]:
    if isinstance(value, Mapping):
        pairs: list[str] = []
        for k, v in value.items():
            pairs.extend(_deep_pairs(f"{prefix}[{k}]", v, enc))
        return pairs
    if isinstance(value, list):
        return [p for v in value for p in _deep_pairs(prefix, v, enc)]
    # Brackets are percent-encoded like any reserved character (3.1.1's table: color%5BR%5D=100).
    return [f"{encode(prefix)}={enc(scalar_text(value))}"]


# ------------------------------------------------------------------------------------- header


_FIELD_UNSAFE = re.compile(r"[^\x20-\x7e\t]")


def _field_text(text: str) -> str:
    return _FIELD_UNSAFE.sub(lambda m: quote(m.group(), safe=""), text)


def header_value(explode: bool, value: Any) -> str:
    """A ``simple`` header value."""
    items, members = _items(value), _members(value)
    if items is not None:
        return ",".join(_field_text(i) for i in items)
    if members is not None:
        return _joined_members(members, "=" if explode else ",", ",", _field_text)
    return _field_text(scalar_text(value))


# ------------------------------------------------------------------------------------- cookie


def cookie_pairs(explode: bool, name: str, value: Any) -> list[str]:
    """The ``name=value`` pieces of the Cookie header (joined with ``; ``)."""
    items, members = _items(value), _members(value)
    key = encode(name)
    if items is not None:
        if explode:
            return [f"{key}={encode(i)}" for i in items]
        return [f"{key}=" + ",".join(encode(i) for i in items)] if items else []
    if members is not None:
        if explode:
            return [f"{encode(k)}={encode(v)}" for k, v in members]
        return [f"{key}=" + _joined_members(members, ",", ",", encode)] if members else []
    return [f"{key}={encode(scalar_text(value))}"]
