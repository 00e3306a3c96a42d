"""NativeRuntime: Python functions decorated with ``@tool`` behind the Runtime seam.

``invoke`` is deliberately thin (a dict lookup, the tool's cached validator, the call) because
the whole call chain is measured against calling the function directly. The call's timeout
(``HostContext.timeout_s``) is enforced by the dispatcher around every runtime, not again here:
a cancel scope costs more than the rest of this path together.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pincer.core.effects import RuntimeKind
from pincer.core.errors import PincerError, ToolError, ToolNotFound, UsageError
from pincer.core.values import HostContext, RuntimeAsk, ToolOutput, ToolSpec
from pincer.runtimes.base import ChangeListener, ChangeListeners
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["NativeRuntime"]

logger = logging.getLogger(__name__)


class NativeRuntime:
    """A mutable set of NativeTools. ``add``/``remove`` notify subscribers (the registry, which
    then re-reads ``tools()``). The specs it lists carry the runtime's name as their source."""

    kind = RuntimeKind.NATIVE

    def __init__(
        self,
        tools: Iterable[NativeTool] = (),
        *,
        name: str = "native",
        on_change: ChangeListener | None = None,
    ) -> None:
        self.name = name
        self._tools: dict[str, NativeTool] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._changes = ChangeListeners(f"native runtime {name!r}")
        if on_change is not None:
            self._changes.subscribe(on_change)
        self._started = False
        for item in tools:
            self._insert(item, replace=False)
        self._rebuild()

    def __repr__(self) -> str:
        return f"NativeRuntime(name={self.name!r}, tools={sorted(self._tools)!r})"

    async def start(self) -> None:
        self._started = True

    async def aclose(self) -> None:
        self._started = False

    def tools(self) -> Sequence[ToolSpec]:
        return self._specs

    def get(self, name: str) -> NativeTool | None:
        return self._tools.get(name)

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener()`` after every add/remove; returns a function that unsubscribes."""
        return self._changes.subscribe(listener)

    def add(self, item: NativeTool, *, replace: bool = False) -> None:
        """Add a tool; a name already present is refused unless ``replace=True``."""
        self._insert(item, replace=replace)
        self._rebuild()
        self._notify()

    def remove(self, name: str) -> NativeTool:
        """Remove and return the tool called ``name``; ToolNotFound when there is none."""
        try:
            item = self._tools.pop(name)
        except KeyError:
            raise ToolNotFound(
                f"runtime {self.name!r} has no tool {name!r}", hint=f"known: {', '.join(sorted(self._tools)) or 'none'}"
            ) from None
        self._rebuild()
        self._notify()
        return item

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        """The tool's own refusals before anyone is asked (the http tool's egress check)."""
        item = self._tools.get(spec.name)
        if item is None or item.preflight is None:
            return None
        return await item.preflight(args, host)

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        """Run one call. Errors: ArgumentsInvalid, ToolNotFound, ToolError (any exception of the
        tool, with its message); a PincerError raised by the tool passes through unchanged."""
        item = self._tools.get(spec.name)
        if item is None:
            raise ToolNotFound(
                f"runtime {self.name!r} has no tool {spec.name!r}",
                hint="the tool was removed; list tools again",
            )
        try:
            value = await item.run(args, host)
        except PincerError:
            raise
        except Exception as exc:
            raise ToolError(
                f"tool {spec.name!r} failed: {type(exc).__name__}: {exc}"
                if str(exc)
                else f"tool {spec.name!r} failed: {type(exc).__name__}",
                hint="the tool raised an exception; check its arguments or its implementation",
            ) from exc
        if isinstance(value, ToolOutput):
            return value
        return ToolOutput(value=value)

    def _insert(self, item: NativeTool, *, replace: bool) -> None:
        if not isinstance(item, NativeTool):
            raise UsageError(
                f"NativeRuntime takes NativeTool objects, got {type(item).__name__}",
                hint="decorate the function with @tool",
            )
        if item.name in self._tools and not replace:
            raise UsageError(
                f"runtime {self.name!r} already has a tool {item.name!r}",
                hint="pick another name with @tool(name=...) or pass replace=True",
            )
        self._tools[item.name] = item

    def _rebuild(self) -> None:
        # The registry names a tool's origin by its source: this runtime's name ("builtin").
        self._specs = tuple(dataclasses.replace(t.spec, source=self.name) for t in self._tools.values())

    def _notify(self) -> None:
        self._changes.notify()
