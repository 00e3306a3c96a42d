"""The runtime seam: each kind of tool (native, wasm, mcp, openapi, script) implements it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, RuntimeAsk, ToolOutput, ToolSpec

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

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        """What the runtime can decide about a call *before* anyone is asked.

        The chain calls it after session policy, grants and argument validation, before the
        approval step. Raise a PincerError (Denied, EgressDenied, ...) to refuse a call that would
        fail anyway (a blocked MCP pin, a URL the egress rule refuses, an exec the policy denies),
        so nobody is asked to approve it; return a :class:`RuntimeAsk` when the runtime's own
        policy needs a person (exec approvals); None when it has nothing to add (a runtime with no
        rule of its own returns None). It must not run the tool.
        """
        ...
