from __future__ import annotations

import pytest

from pincer.core.effects import RuntimeKind
from pincer.core.errors import ToolNotFound, UsageError
from pincer.core.values import ToolOutput, ToolSpec
from pincer.registry import Registry, RegistryEvent


def spec(name: str, description: str = "d", source: str = "test") -> ToolSpec:
    return ToolSpec(
        name=name, description=description, input_schema={"type": "object"}, effects=frozenset(),
        runtime=RuntimeKind.NATIVE, side_effecting=False, source=source,
    )  # fmt: skip


class ListRuntime:
    kind = RuntimeKind.NATIVE

    def __init__(self, *specs: ToolSpec) -> None:
        self.specs = list(specs)

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def tools(self):
        return self.specs

    async def preflight(self, spec, args, host):
        return None

    async def invoke(self, spec, args, host):
        return ToolOutput(value=None)


def test_add_get_list_remove_with_events() -> None:
    registry = Registry()
    events: list[RegistryEvent] = []
    unsubscribe = registry.subscribe(events.append)
    runtime = ListRuntime(spec("b"), spec("a"))
    registry.add_runtime(runtime)
    assert [s.name for s in registry.list()] == ["a", "b"]
    assert registry.resolve("a")[1] is runtime
    registry.remove_runtime(runtime)
    with pytest.raises(ToolNotFound, match="no tool named 'a'"):
        registry.get("a")
    assert events == [RegistryEvent(added=("b", "a")), RegistryEvent(removed=("b", "a"))]
    unsubscribe()
    registry.add_runtime(runtime)
    assert len(events) == 2


def test_name_clash_is_refused_naming_both_sources() -> None:
    registry = Registry()
    registry.add_runtime(ListRuntime(spec("echo", source="builtin")))
    with pytest.raises(UsageError, match="already taken by builtin"):
        registry.add_runtime(ListRuntime(spec("x"), spec("echo", source="server")))
    assert "x" not in registry  # all or nothing


def test_refresh_reports_added_removed_changed() -> None:
    registry = Registry()
    runtime = ListRuntime(spec("a"), spec("b"))
    registry.add_runtime(runtime)
    events: list[RegistryEvent] = []
    registry.subscribe(events.append)
    runtime.specs = [spec("a", description="new"), spec("c")]
    event = registry.refresh(runtime)
    assert event == RegistryEvent(added=("c",), removed=("b",), changed=("a",))
    assert events == [event]
    assert registry.refresh(runtime) == RegistryEvent()
    assert len(events) == 1


def test_broken_listener_does_not_break_registration() -> None:
    registry = Registry()

    def boom(event):
        raise RuntimeError("listener bug")

    registry.subscribe(boom)
    registry.add_runtime(ListRuntime(spec("a")))
    assert "a" in registry
