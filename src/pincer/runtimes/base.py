"""The runtime seam: each kind of tool (native, wasm, mcp, openapi, script) implements it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec

__all__ = ["Runtime", "ChangeListener", "ChangeListeners"]

logger = logging.getLogger(__name__)

ChangeListener = Callable[[], None]


class ChangeListeners:
    """The ``subscribe`` half of a runtime whose tool set changes (installs, list_changed)."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._listeners: list[ChangeListener] = []

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener()`` after every change; returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                # One broken subscriber must not stop the others from hearing about the change.
                logger.exception("change listener of %s failed", self._owner)


@runtime_checkable
class Runtime(Protocol):
    """A source of tools. ``tools()`` is cheap and synchronous; ``invoke`` runs one call."""

    kind: RuntimeKind

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def tools(self) -> Sequence[ToolSpec]: ...

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput: ...
