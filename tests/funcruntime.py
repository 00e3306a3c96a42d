"""A real Runtime over plain async functions, so each step of the chain can be driven precisely."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec

Fn = Callable[[dict[str, Any], HostContext], Awaitable[Any]]


class FuncRuntime:
    """A real Runtime over plain async functions, so each chain step can be driven precisely."""

    kind = RuntimeKind.NATIVE

    def __init__(self) -> None:
        self.specs: dict[str, ToolSpec] = {}
        self.funcs: dict[str, Fn] = {}
        self.calls: dict[str, int] = {}

    def add(self, name: str, fn: Fn, *, effects=(), side_effecting=False, schema=None, call_effects=None) -> None:
        self.specs[name] = ToolSpec(
            name=name, description=f"{name} tool", effects=frozenset(effects), runtime=RuntimeKind.NATIVE,
            side_effecting=side_effecting, source="test", call_effects=call_effects,
            input_schema=schema or {"type": "object", "properties": {"text": {"type": "string"}}},
        )  # fmt: skip
        self.funcs[name] = fn
        self.calls[name] = 0

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def tools(self):
        return list(self.specs.values())

    async def preflight(self, spec: ToolSpec, args: object, host: HostContext) -> None:
        """These test tools refuse nothing before a call."""

    async def invoke(self, spec, args, host):
        self.calls[spec.name] += 1
        value = await self.funcs[spec.name](dict(args), host)
        return value if isinstance(value, ToolOutput) else ToolOutput(value=value)


class RecordingClient:
    """A client channel that keeps the progress and log text a tool sends (what a caller would see)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self.messages.append(message or "")

    async def log(self, level: str, message: str) -> None:
        self.messages.append(message)
