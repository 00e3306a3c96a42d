"""The live set of tools from every runtime, with change events.

A tool name belongs to one runtime; a second runtime offering the same name is refused with an
error naming both sources, never silently shadowed.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pincer.core.errors import ToolNotFound, UsageError
from pincer.core.values import ToolSpec
from pincer.runtimes.base import Runtime

logger = logging.getLogger(__name__)

__all__ = ["Registry", "RegistryEvent"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RegistryEvent:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


Listener = Callable[[RegistryEvent], None]


class Registry:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[ToolSpec, Runtime]] = {}
        self._runtimes: list[Runtime] = []
        self._listeners: list[Listener] = []

    # -- reading -----------------------------------------------------------------------------

    def get(self, name: str) -> ToolSpec:
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(f"no tool named {name!r}", hint="`pincer tools list` shows the tools there are")
        return entry[0]

    def resolve(self, name: str) -> tuple[ToolSpec, Runtime]:
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(f"no tool named {name!r}", hint="`pincer tools list` shows the tools there are")
        return entry

    def list(self) -> list[ToolSpec]:
        return sorted((spec for spec, _ in self._entries.values()), key=lambda s: s.name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @property
    def runtimes(self) -> tuple[Runtime, ...]:
        return tuple(self._runtimes)

    # -- changing ----------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def add_runtime(self, runtime: Runtime) -> None:
        """Register a started runtime's tools (all or none)."""
        if runtime in self._runtimes:
            return
        specs = list(runtime.tools())
        self._check_free(specs, runtime)
        self._runtimes.append(runtime)
        for spec in specs:
            self._entries[spec.name] = (spec, runtime)
        self._emit(RegistryEvent(added=tuple(s.name for s in specs)))

    def remove_runtime(self, runtime: Runtime) -> None:
        if runtime not in self._runtimes:
            return
        self._runtimes.remove(runtime)
        removed = tuple(name for name, (_, owner) in self._entries.items() if owner is runtime)
        for name in removed:
            del self._entries[name]
        self._emit(RegistryEvent(removed=removed))

    def refresh(self, runtime: Runtime) -> RegistryEvent:
        """Re-read a runtime's tools after it changed (install, list_changed)."""
        if runtime not in self._runtimes:
            raise UsageError("refresh of a runtime that is not registered")
        specs = {spec.name: spec for spec in runtime.tools()}
        self._check_free(list(specs.values()), runtime)
        old = {name: spec for name, (spec, owner) in self._entries.items() if owner is runtime}
        added = tuple(sorted(set(specs) - set(old)))
        removed = tuple(sorted(set(old) - set(specs)))
        changed = tuple(
            sorted(n for n in set(specs) & set(old) if specs[n].identity != old[n].identity)
        )
        for name in removed:
            del self._entries[name]
        for name, spec in specs.items():
            self._entries[name] = (spec, runtime)
        event = RegistryEvent(added=added, removed=removed, changed=changed)
        if added or removed or changed:
            self._emit(event)
        return event

    def _check_free(self, specs: builtins.list[ToolSpec], runtime: Runtime) -> None:
        for spec in specs:
            entry = self._entries.get(spec.name)
            if entry is not None and entry[1] is not runtime:
                raise UsageError(
                    f"tool name {spec.name!r} from {spec.source} is already taken by {entry[0].source}",
                    hint="remove one of them or rename the tool",
                )

    def _emit(self, event: RegistryEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not break registration
                logger.exception("registry listener failed")
