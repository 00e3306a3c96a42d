"""Telegram's Bot API method table, derived from npm ``@grammyjs/types`` (installed by
``make builtins-deps`` into ``.cache/npm-openapi``): ``methods.d.ts`` declares every method of
``ApiMethods`` with its parameters (``sendMessage(args: { chat_id: number | string; text: string;
... })``); the other ``*.d.ts`` files declare the object types a parameter takes
(``ReplyParameters``) and the string unions (``ParseMode``).

:func:`problems` checks one JSON body against a method: unknown parameters, missing required
ones, and each value against its declared type (``number``, ``string``, ``boolean``, literal
unions, arrays, and declared object types, recursively). ``F`` (grammY's file type) is "a file
upload": only an :class:`Upload` (a file part of a multipart body, :func:`parse_multipart`) fits
it, which a JSON body cannot carry.
"""

from __future__ import annotations

import email.parser
import email.policy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.builtins.slack_methods import Field, _matching, _members, _split_top, _strip_comments

ROOT = Path(__file__).resolve().parents[2] / ".cache" / "npm-openapi" / "node_modules" / "@grammyjs" / "types"


@functools.cache
def methods() -> dict[str, dict[str, Field]]:
    text = _strip_comments((ROOT / "methods.d.ts").read_text("utf-8"))
    start = text.index("export type ApiMethods<F> = {")
    body = text[start : _matching(text, text.index("{", start)) + 1]
    found: dict[str, dict[str, Field]] = {}
    for match in re.finditer(r"^    (\w+)\((?:args(\??): \{)?", body, re.M):
        if match.group(0).endswith("{"):
            open_at = match.end() - 1
            found[match.group(1)] = _members(body[open_at + 1 : _matching(body, open_at)])
        else:
            found[match.group(1)] = {}
    return found


@functools.cache
def _types() -> dict[str, str]:
    """Declared names -> their body (``{...}`` members of an interface, or a type alias's text)."""
    found: dict[str, str] = {}
    for path in sorted(ROOT.glob("*.d.ts")):
        text = _strip_comments(path.read_text("utf-8"))
        for match in re.finditer(r"export interface (\w+)(?:<[^>]*>)?\s*(?:extends [^{]+)?\{", text):
            found.setdefault(match.group(1), text[match.end() - 1 : _matching(text, match.end() - 1) + 1])
        for match in re.finditer(r"export type (\w+)\s*=\s*([^;{]+);", text):
            found.setdefault(match.group(1), match.group(2).strip())
    return found


def _type_ok(kind: str, value: Any, depth: int = 0) -> bool:
    kind = kind.strip()
    if depth > 20:
        return True
    branches = _split_top(kind, "|")
    if len(branches) > 1:
        return any(_type_ok(b, value, depth + 1) for b in branches)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind in ("boolean", "true", "false"):
        return isinstance(value, bool) and (kind == "boolean" or str(value).lower() == kind)
    if kind == "F":
        return isinstance(value, Upload)  # a file upload: multipart only
    if isinstance(value, Upload):
        return False  # a file part where the method takes no file
    if kind.startswith('"') and kind.endswith('"'):
        return value == kind[1:-1]
    if kind.endswith("[]"):
        return isinstance(value, list) and all(_type_ok(kind[:-2].strip("()"), v, depth + 1) for v in value)
    declared = _types().get(kind)
    if declared is None:
        return True  # a generic or mapped type this checker does not model
    if declared.startswith("{"):
        if not isinstance(value, dict):
            return False
        return not _object_problems(_members(declared[1:-1]), value, depth + 1)
    return _type_ok(declared, value, depth + 1)


def _object_problems(shape: dict[str, Field], body: dict[str, Any], depth: int = 0) -> list[str]:
    issues = [f"unknown parameter {k!r}" for k in body if k not in shape]
    issues += [f"missing required parameter {f.name!r}" for f in shape.values() if f.required and f.name not in body]
    issues += [
        f"parameter {k!r} is not {shape[k].type}: {v!r}"
        for k, v in body.items()
        if k in shape and not _type_ok(shape[k].type, v, depth)
    ]
    return issues


def problems(method: str, body: dict[str, Any]) -> list[str]:
    table = methods()
    if method not in table:
        return [f"{method} is not a Bot API method"]
    return _object_problems(table[method], body)


@dataclass(frozen=True, kw_only=True, slots=True)
class Upload:
    """A file part of a multipart body."""

    filename: str
    content_type: str
    data: bytes = field(repr=False)


def _declared(method: str, name: str) -> str | None:
    found = methods().get(method, {}).get(name)
    return found.type if found is not None else None


def _field_value(method: str, name: str, text: str) -> Any:
    """A multipart text field as the Bot API reads it: the string itself where the parameter
    takes a string, else its JSON (numbers, booleans, objects such as reply_parameters)."""
    kind = _declared(method, name)
    if kind is None or _type_ok(kind, text):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_multipart(method: str, content_type: str, raw: bytes) -> tuple[dict[str, Any], dict[str, Upload]]:
    """The parameters of a ``multipart/form-data`` body (file parts as :class:`Upload`, also in
    the second mapping by name); ValueError says what does not fit RFC 7578."""
    if "boundary=" not in content_type:
        raise ValueError("multipart/form-data without a boundary")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart() or message.defects:
        raise ValueError(f"not a well-formed multipart body ({[type(d).__name__ for d in message.defects]})")
    body: dict[str, Any] = {}
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        if part.get_content_disposition() != "form-data" or part.defects:
            raise ValueError("a part without Content-Disposition: form-data")
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            raise ValueError("a part without a name")
        if name in body:
            raise ValueError(f"parameter {name!r} sent twice")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = body[name] = Upload(filename=filename, content_type=part.get_content_type(), data=data)
        else:
            body[name] = _field_value(method, name, data.decode("utf-8"))
    return body, files
