"""Slack's Web API method table, derived from the files npm ``@slack/web-api`` ships (installed by
``make builtins-deps`` into ``.cache/npm-openapi``):

* the method names from ``dist/methods.js`` (``bindApiCall(this, 'chat.postMessage')``);
* the HTTP verb and body encoding from ``dist/WebClient.js`` (every call is a ``POST`` of
  ``application/x-www-form-urlencoded`` to ``<slackApiUrl><method>``);
* each method's arguments from its ``XxxArguments`` type in ``dist/types/request/*.d.ts``: a small
  resolver for the TypeScript these declarations use (interfaces with ``extends``, type aliases of
  ``&`` intersections and ``|`` unions, object literals, ``Partial<>``, ``OptionalArgument<>``).
  A union stays a list of alternatives: a request must fit one of them whole.

Types from ``@slack/types`` (blocks, attachments) are outside the package and count as
"any value"; for a form body every value is a string, checked as a number or boolean where the
declaration says so.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / ".cache" / "npm-openapi" / "node_modules" / "@slack" / "web-api" / "dist"


@dataclass(frozen=True)
class Field:
    name: str
    required: bool
    type: str  # the declared type text


Shape = dict[str, Field]  # one alternative: field name -> field


@dataclass(frozen=True)
class Method:
    name: str
    http_method: str
    content_type: str
    alternatives: tuple[Shape, ...]

    def problems(self, args: dict[str, str]) -> list[str]:
        """Why ``args`` (a form body) fits none of the alternatives; [] when one fits."""
        found: list[list[str]] = []
        for shape in self.alternatives:
            issues = [f"unknown argument {k!r}" for k in args if k not in shape and k != "token"]
            issues += [f"missing required argument {f.name!r}" for f in shape.values() if f.required and f.name not in args]
            for key, value in args.items():
                if key in shape:
                    issue = _type_problem(shape[key], value)
                    if issue:
                        issues.append(issue)
            if not issues:
                return []
            found.append(issues)
        return min(found, key=len) if found else ["no alternatives"]


def _type_problem(field: Field, value: str) -> str | None:
    kind = field.type.strip()
    if kind == "number" and not re.fullmatch(r"-?\d+(\.\d+)?", value):
        return f"{field.name!r} must be a number, got {value!r}"
    if kind == "boolean" and value not in ("true", "false", "1", "0"):
        return f"{field.name!r} must be a boolean, got {value!r}"
    if kind == "never":
        return f"{field.name!r} may not be sent in this form of the call"
    if kind in ("true", "false") and value != kind:
        return f"{field.name!r} must be {kind}, got {value!r}"
    literals = re.findall(r"'([^']*)'", kind)
    if literals and re.fullmatch(r"\s*'[^']*'(\s*\|\s*'[^']*')*\s*", kind) and value not in literals:
        return f"{field.name!r} must be one of {literals}, got {value!r}"
    return None


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{([<":
            depth += 1
        elif ch in "})]>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _matching(text: str, start: int, open_ch: str = "{", close_ch: str = "}") -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced")


@functools.cache
def _declarations() -> dict[str, tuple[str, list[str], str]]:
    """name -> (kind, extends, body): ``interface`` bodies and ``type`` alias expressions."""
    found: dict[str, tuple[str, list[str], str]] = {}
    for path in sorted((ROOT / "types" / "request").rglob("*.d.ts")):
        text = _strip_comments(path.read_text("utf-8"))
        for match in re.finditer(r"(?:export\s+)?interface\s+(\w+)(?:<[^>]*>)?\s*(?:extends\s+([^{]+))?\{", text):
            end = _matching(text, match.end() - 1)
            extends = _split_top(match.group(2) or "", ",")
            found.setdefault(match.group(1), ("interface", extends, text[match.end() : end]))
        for match in re.finditer(r"(?:export\s+)?type\s+(\w+)(?:<[^=]*>)?\s*=", text):
            i, depth = match.end(), 0
            while i < len(text):
                ch = text[i]
                if ch in "{([<":
                    depth += 1
                elif ch in "})]>":
                    depth -= 1
                elif ch == ";" and depth == 0:
                    break
                i += 1
            found.setdefault(match.group(1), ("type", [], text[match.end() : i]))
    return found


def _members(body: str) -> Shape:
    shape: Shape = {}
    for member in _split_top(body, ";"):
        m = re.match(r"(?:readonly\s+)?['\"]?([A-Za-z_]\w*)['\"]?(\?)?\s*:\s*(.*)$", member, re.S)
        if m:
            shape[m.group(1)] = Field(name=m.group(1), required=not m.group(2), type=" ".join(m.group(3).split()))
    return shape


def _cross(left: list[Shape], right: list[Shape]) -> list[Shape]:
    return [{**a, **b} for a in left for b in right]


def _optional(shapes: list[Shape]) -> list[Shape]:
    return [{k: Field(name=f.name, required=False, type=f.type) for k, f in s.items()} for s in shapes]


def _resolve(expr: str, depth: int = 0) -> list[Shape]:
    expr = expr.strip()
    if depth > 40:
        raise ValueError(f"type too deep: {expr[:80]}")
    branches = _split_top(expr, "|")
    if len(branches) > 1:
        return [s for b in branches for s in _resolve(b, depth + 1)]
    parts = _split_top(expr, "&")
    if len(parts) > 1:
        shapes: list[Shape] = [{}]
        for part in parts:
            shapes = _cross(shapes, _resolve(part, depth + 1))
        return shapes
    if expr.startswith("(") and expr.endswith(")"):
        return _resolve(expr[1:-1], depth + 1)
    if expr.startswith("{"):
        return [_members(expr[1 : _matching(expr, 0)])]
    generic = re.fullmatch(r"(\w+)<(.*)>", expr, re.S)
    if generic:
        outer, inner = generic.group(1), generic.group(2)
        if outer == "Partial":
            return _optional(_resolve(inner, depth + 1))
        if outer == "OptionalArgument":
            return _resolve(inner, depth + 1)
        if outer in ("Omit", "Pick"):
            target, keys = _split_top(inner, ",")
            names = set(re.findall(r"'(\w+)'", keys))
            keep = (lambda k: k not in names) if outer == "Omit" else (lambda k: k in names)
            return [{k: f for k, f in s.items() if keep(k)} for s in _resolve(target, depth + 1)]
        return [{}]
    decl = _declarations().get(expr)
    if decl is None:
        return [{}]  # a type from elsewhere (@slack/types): no argument names of its own
    kind, extends, body = decl
    if kind == "type":
        return _resolve(body, depth + 1)
    shapes = [_members(body)]
    for base in extends:
        shapes = _cross(_resolve(base, depth + 1), shapes)
    return shapes


def _type_name(method: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in method.split(".")) + "Arguments"


@functools.cache
def method_names() -> frozenset[str]:
    text = (ROOT / "methods.js").read_text("utf-8")
    return frozenset(re.findall(r"bindApiCall(?:WithOptionalArgument)?\(this, '([\w.]+)'\)", text))


@functools.cache
def http_shape() -> tuple[str, str]:
    """The verb and form encoding WebClient sends every method with."""
    text = (ROOT / "WebClient.js").read_text("utf-8")
    verb = re.search(r"method: '(\w+)'", text)
    encoding = re.search(r"'Content-Type': '(application/x-www-form-urlencoded)'", text)
    if verb is None or encoding is None:
        raise ValueError("WebClient.js no longer names its verb or form encoding")
    return verb.group(1), encoding.group(1)


@functools.cache
def method(name: str) -> Method:
    if name not in method_names():
        raise KeyError(f"{name} is not a Slack Web API method")
    verb, content_type = http_shape()
    alternatives = _resolve(_type_name(name))
    # Slack's own token argument (TokenOverridable) is never sent by pincer: the header carries it.
    return Method(name=name, http_method=verb, content_type=content_type, alternatives=tuple(alternatives))
