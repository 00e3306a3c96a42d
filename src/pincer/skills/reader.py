"""Reading values out of decoded frontmatter: each accessor checks the shape it expects and
records a warning naming the key when a value is of another shape (the value is then ignored)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pincer.core.errors import SkillError
from pincer.skills.frontmatter import parse_yaml
from pincer.skills.model import Issue, ParamType

__all__ = ["FieldReader", "kind_of", "param_type", "MAX_LIST_ITEMS"]

MAX_LIST_ITEMS = 256


class FieldReader:
    """Collects warnings while values are read out of the decoded frontmatter."""

    def __init__(self) -> None:
        self.warnings: list[Issue] = []

    def warn(self, key: str, message: str, line: int | None = None) -> None:
        self.warnings.append(Issue(key=key, message=message, line=line))

    def text(self, data: Mapping[str, Any], key: str, *, where: str = "") -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            self.warn(where + key, "expected text, got a boolean; ignored")
            return None
        if isinstance(value, (int, float)):
            return str(value)
        if isinstance(value, str):
            return value
        self.warn(where + key, f"expected text, got {kind_of(value)}; ignored")
        return None

    def flag(self, data: Mapping[str, Any], key: str, default: bool, *, where: str = "") -> bool:
        value = data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
            return value.strip().lower() in ("true", "yes", "on", "1")
        self.warn(where + key, f"expected true or false, got {kind_of(value)}; using {str(default).lower()}")
        return default

    def strings(self, data: Mapping[str, Any], key: str, *, where: str = "", split: bool = True) -> tuple[str, ...]:
        """A list of strings; a single string is split on commas and spaces when ``split``."""
        value = data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            items = re.split(r"[,\s]+", value) if split else [value]
            return tuple(i for i in (s.strip() for s in items) if i)
        if isinstance(value, list):
            out: list[str] = []
            for index, item in enumerate(value[:MAX_LIST_ITEMS]):
                if isinstance(item, (str, int, float)) and not isinstance(item, bool) and str(item).strip():
                    out.append(str(item).strip())
                else:
                    self.warn(f"{where}{key}.{index}", f"expected text, got {kind_of(item)}; ignored")
            if len(value) > MAX_LIST_ITEMS:
                self.warn(where + key, f"more than {MAX_LIST_ITEMS} entries; the rest are ignored")
            return tuple(dict.fromkeys(out))
        self.warn(where + key, f"expected a list of names, got {kind_of(value)}; ignored")
        return ()

    def mapping(self, data: Mapping[str, Any], key: str, *, where: str = "") -> dict[str, Any]:
        value = data.get(key)
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        if isinstance(value, str) and value.strip().startswith("{"):
            decoded = decode_inline(value)
            if isinstance(decoded, dict):
                return decoded
        self.warn(where + key, f"expected a mapping, got {kind_of(value)}; ignored")
        return {}


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def decode_inline(text: str) -> Any:
    """The legacy single-line JSON form (``metadata: '{"clawdbot": {...}}'``), JSON5-ish commas too."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        data, _ = parse_yaml("value: " + text.replace("\n", " "), source="<inline>")
        return data.get("value")
    except SkillError:
        return None


def param_type(reader: FieldReader, value: Any, key: str) -> ParamType:
    if value is None:
        return ParamType.STRING
    text = str(value).strip().lower()
    aliases = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}
    try:
        return ParamType(aliases.get(text, text))
    except ValueError:
        reader.warn(key, f"unknown type {str(value)[:40]!r}; string|integer|number|boolean|array|object, string is used")
        return ParamType.STRING
