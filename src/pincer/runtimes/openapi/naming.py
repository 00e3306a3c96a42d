"""Tool names for a service's operations: ``{service}_{operation}``, at most 64 characters.

64 characters is the limit of the common function-calling APIs (OpenAI's and Anthropic's tool
names), and GitHub's own description has operation ids that make longer names. The rule, stable
for a given document:

1. ``{service}_{operation}`` with anything but letters, digits and ``_`` made ``_``;
2. a name longer than 64 characters keeps its first 55 characters and ends in ``_`` and the first
   8 hex digits of the SHA-256 of the full name (``gh_actions_get_..._a1b2c3d4``);
3. a name that two operations would share (two ids that differ only in punctuation, or a
   shortened name equal to another's) is made unique by hashing the full name with a counter
   (``#2``, ``#3``...) until it is free, in document order.

Names of 64 characters or fewer are never changed by rule 2, so short names read as written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_TOOL_NAME", "tool_name", "assign_tool_names"]

MAX_TOOL_NAME = 64
_HASH_HEX = 8
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_]")


def tool_name(service: str, operation: str) -> str:
    """The full (unshortened) name: letters, digits and ``_`` only."""
    return _NOT_NAME_CHAR.sub("_", f"{service}_{operation}")


def _shortened(full: str, salt: int = 0) -> str:
    seed = full if salt == 0 else f"{full}#{salt}"
    digest = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:_HASH_HEX]
    return f"{full[: MAX_TOOL_NAME - _HASH_HEX - 1]}_{digest}"


def assign_tool_names(service: str, operations: Iterable[str]) -> list[str]:
    """One unique name of at most 64 characters per operation, in the order given."""
    fulls = [tool_name(service, op) for op in operations]
    # Names that need no change are claimed first, so a shortened name never displaces one.
    taken: set[str] = set()
    wanted: list[str | None] = []
    for full in fulls:
        if len(full) <= MAX_TOOL_NAME and full not in taken:
            taken.add(full)
            wanted.append(full)
        else:
            wanted.append(None)
    names: list[str] = []
    for full, name in zip(fulls, wanted, strict=True):
        if name is None:
            salt = 0 if len(full) > MAX_TOOL_NAME else 1
            name = _shortened(full, salt)
            while name in taken:
                salt += 1
                name = _shortened(full, salt)
            taken.add(name)
        names.append(name)
    return names
