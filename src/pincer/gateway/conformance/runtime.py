"""A small runtime of hand-written tools with explicit schemas, for the conformance fixtures.

The fixtures need exact wire shapes (content blocks, JSON Schema 2020-12 keywords, a tool that
appears and disappears), so they are written against the Runtime seam directly rather than
derived from type hints. They run through the dispatcher like every other tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pincer.core.effects import RuntimeKind
from pincer.core.errors import ToolError, ToolNotFound
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.gateway.channel import McpChannel

__all__ = ["FixtureTool", "FixtureRuntime", "fixture", "channel_of", "NO_ARGS", "SOURCE"]

SOURCE = "conformance-fixtures"
NO_ARGS: Mapping[str, Any] = {"type": "object", "properties": {}}
Handler = Callable[[Mapping[str, Any], HostContext], Awaitable[ToolOutput]]


@dataclass(frozen=True, kw_only=True, slots=True)
class FixtureTool:
    spec: ToolSpec
    handler: Handler


def fixture(name: str, description: str, schema: Mapping[str, Any] = NO_ARGS) -> Callable[[Handler], FixtureTool]:
    """Declare a fixture tool; it has no effects, so the default policy allows it."""

    def wrap(handler: Handler) -> FixtureTool:
        spec = ToolSpec(
            name=name,
            description=description,
            input_schema=dict(schema),
            effects=frozenset(),
            runtime=RuntimeKind.NATIVE,
            side_effecting=False,
            source=SOURCE,
        )
        return FixtureTool(spec=spec, handler=handler)

    return wrap


def channel_of(host: HostContext) -> McpChannel:
    """The MCP channel of the call; the fixtures make sense only when called over MCP. The chain
    hands tools a scanning wrapper around it (``inner``), which passes the rest through."""
    if isinstance(getattr(host.client, "inner", host.client), McpChannel):
        return host.client  # type: ignore[return-value]
    raise ToolError(f"{host.tool} needs an MCP client", hint="call it over MCP (pincer serve or pincer mcp stdio)")


class FixtureRuntime:
    kind = RuntimeKind.NATIVE

    def __init__(self, tools: Iterable[FixtureTool] = ()) -> None:
        self._tools: dict[str, FixtureTool] = {t.spec.name: t for t in tools}

    def __repr__(self) -> str:
        return f"FixtureRuntime({len(self._tools)} tools)"

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def tools(self) -> Sequence[ToolSpec]:
        return tuple(t.spec for t in self._tools.values())

    def add(self, tool: FixtureTool) -> None:
        self._tools[tool.spec.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def has(self, name: str) -> bool:
        return name in self._tools

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        tool = self._tools.get(spec.name)
        if tool is None:
            raise ToolNotFound(f"fixture {spec.name!r} is gone", hint="list the tools again")
        return await tool.handler(args, host)
