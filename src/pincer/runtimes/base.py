"""The runtime seam: each kind of tool (native, wasm, mcp, openapi, script) implements it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec

__all__ = ["Runtime", "ChangeListener"]

ChangeListener = Callable[[], None]


@runtime_checkable
class Runtime(Protocol):
    """A source of tools. ``tools()`` is cheap and synchronous; ``invoke`` runs one call."""

    kind: RuntimeKind

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def tools(self) -> Sequence[ToolSpec]: ...

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput: ...
