"""Resource limits for WASM executions: engine-wide defaults and per-tool overrides.

Defaults (``WasmLimits()``), chosen so that a real Python guest (componentize-py, ~18 MB
component) fits with room to spare:

======================  ==============  =====================================================
limit                   default         why
======================  ==============  =====================================================
``memory_bytes``        64 MiB          a Python guest needs ~12.4 MB to instantiate and
                                        ~16 MB for modest work
``fuel``                1e10            ~1e9 for modest work; a 1e6-iteration Python loop
                                        burns ~1.1e9; 1e10 is about 1.3 s of CPU
``timeout_s``           10 s            the epoch deadline; a call's ``HostContext.timeout_s``
                                        lowers it, never raises it
``tick_ms``             10 ms           epoch ticker period: the deadline's resolution
``max_log_entries``     1,000           per execution, as the WIT promises
``max_log_bytes``       4,096           per entry; longer entries are cut
``max_http_requests``   50              per execution
``max_output_bytes``    1 MiB           the tool's JSON output
``workers``             2               executions in parallel (the GIL is released in wasm)
``allow_loopback_http`` False           tests only: lets http-request reach 127.0.0.1 over
                                        plain http. No manifest can turn it on.
======================  ==============  =====================================================

A tool's capabilities file may lower or raise ``memory_mb``, ``fuel`` and ``timeout_s``
through a ``limits`` object; each override is capped by the ``max_*`` ceilings of the engine
limits so a manifest cannot ask for unbounded resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pincer.core.errors import ManifestError, UsageError

__all__ = ["WasmLimits", "ToolLimits", "parse_tool_limits", "MIB"]

MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class WasmLimits:
    """Engine-wide limits and defaults; see the module docstring for the table."""

    memory_bytes: int = 64 * MIB
    fuel: int = 10_000_000_000
    timeout_s: float = 10.0
    tick_ms: int = 10
    max_log_entries: int = 1_000
    max_log_bytes: int = 4_096
    max_http_requests: int = 50
    max_output_bytes: int = 1 * MIB
    workers: int = 2
    max_invoke_depth: int = 4
    allow_loopback_http: bool = False
    # ceilings for per-tool overrides
    max_memory_bytes: int = 512 * MIB
    max_fuel: int = 100_000_000_000
    max_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        checks = {
            "memory_bytes": self.memory_bytes > 0,
            "fuel": self.fuel > 0,
            "timeout_s": self.timeout_s > 0,
            "tick_ms": self.tick_ms > 0,
            "max_log_entries": self.max_log_entries >= 0,
            "max_log_bytes": self.max_log_bytes > 0,
            "max_http_requests": self.max_http_requests >= 0,
            "max_output_bytes": self.max_output_bytes > 0,
            "workers": self.workers > 0,
            "max_invoke_depth": self.max_invoke_depth >= 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise UsageError(f"WasmLimits: {', '.join(bad)} must be positive", hint="pass positive numbers")

    def for_tool(self, tool: ToolLimits | None) -> WasmLimits:
        """These limits with a tool's overrides applied, each capped by its ceiling."""
        if tool is None:
            return self
        changes: dict[str, Any] = {}
        if tool.memory_bytes is not None:
            changes["memory_bytes"] = min(tool.memory_bytes, self.max_memory_bytes)
        if tool.fuel is not None:
            changes["fuel"] = min(tool.fuel, self.max_fuel)
        if tool.timeout_s is not None:
            changes["timeout_s"] = min(tool.timeout_s, self.max_timeout_s)
        return replace(self, **changes) if changes else self


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolLimits:
    """A tool's own overrides (from ``limits`` in its capabilities file); None keeps the default."""

    memory_bytes: int | None = None
    fuel: int | None = None
    timeout_s: float | None = None


def _positive_number(raw: Mapping[str, Any], key: str, source: str, minimum: float) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
        raise ManifestError(
            f"expected a number >= {minimum:g}, got {value!r}",
            source=source,
            key=f"limits.{key}",
            hint="remove the key to keep the default",
        )
    return value


def parse_tool_limits(raw: object, *, source: str = "<capabilities>") -> ToolLimits | None:
    """Read the ``limits`` object of a capabilities file: ``memory_mb``, ``fuel``, ``timeout_s``.

    Unknown keys are ignored (the format is shared with other hosts); a wrong type is a
    ManifestError naming the key."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ManifestError(f"expected an object, got {type(raw).__name__}", source=source, key="limits")
    memory_mb = _positive_number(raw, "memory_mb", source, 1)
    fuel = _positive_number(raw, "fuel", source, 1)
    timeout_s = _positive_number(raw, "timeout_s", source, 0.001)
    if memory_mb is not None and memory_mb * MIB > 2**40:
        raise ManifestError("memory_mb is beyond any sane limit", source=source, key="limits.memory_mb")
    if fuel is not None and fuel > 2**62:
        raise ManifestError("fuel is beyond any sane limit", source=source, key="limits.fuel")
    return ToolLimits(
        memory_bytes=int(memory_mb * MIB) if memory_mb is not None else None,
        fuel=int(fuel) if fuel is not None else None,
        timeout_s=float(timeout_s) if timeout_s is not None else None,
    )
