"""Tool names as providers accept them, and back.

Both wire formats want function names matching ``^[a-zA-Z0-9_-]{1,64}$``; pincer's tools may be
called ``code-review.lint`` or ``github_get_issue`` or anything up to 128 characters. A name that
fits is kept; one that does not has every other character replaced by ``_`` and is cut to fit,
with a short digest of the real name added when that would collide with another tool's name.
The map is made once per run over every tool the run may offer, so it is the same in every
turn and ``load_tools`` cannot shift it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["ToolNames", "SAFE_NAME", "MAX_NAME_CHARS"]

SAFE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME_CHARS = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class ToolNames:
    """A one-to-one map between real tool names and provider-safe ones. ``reserved`` names (the
    loop's own tools) are taken first, so a registry tool of the same name gets another."""

    def __init__(self, names: Iterable[str], *, reserved: Iterable[str] = ()) -> None:
        self._safe: dict[str, str] = {}
        self._real: dict[str, str] = {}
        ordered = list(dict.fromkeys(names))
        for name in reserved:
            self._bind(name, name)
        # Names that fit keep themselves; only then are the others placed around them.
        for name in ordered:
            if SAFE_NAME.match(name) and name not in self._real and name not in self._safe:
                self._bind(name, name)
        for name in ordered:
            if name not in self._safe:
                self._bind(name, self._fresh(name))

    def _bind(self, real: str, safe: str) -> None:
        self._safe[real] = safe
        self._real[safe] = real

    def _fresh(self, real: str) -> str:
        base = _UNSAFE.sub("_", real)[:MAX_NAME_CHARS] or "tool"
        if base not in self._real:
            return base
        digest = hashlib.sha256(real.encode()).hexdigest()
        for width in (6, 10, 16, 64):
            candidate = f"{base[: MAX_NAME_CHARS - width - 1]}_{digest[:width]}"
            if candidate not in self._real:
                return candidate
        raise ValueError(f"no provider-safe name left for {real!r}")  # sha256 prefixes do not all collide

    def safe(self, real: str) -> str:
        return self._safe[real]

    def real(self, safe: str) -> str | None:
        """The real name behind ``safe``; None for a name the run never offered."""
        return self._real.get(safe)

    def __contains__(self, real: object) -> bool:
        return real in self._safe

    def __len__(self) -> int:
        return len(self._safe)
