"""A compiled tool component and one execution of it in a fresh store.

Every call gets a new ``Store`` and a new instance: nothing a guest does survives into the next
call, and a trapped instance (which wasmtime refuses to enter again) is simply dropped. Each
store carries the three limits: fuel, an epoch deadline and a memory ceiling. A trap becomes a
:class:`ToolError` (or :class:`ToolTimeout` for the deadline) naming the limit that was hit.

These functions block; the runtime calls them on worker threads.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pincer.core.errors import RuntimeUnavailable, ToolError, ToolTimeout
from pincer.core.extras import require
from pincer.runtimes.wasm.host import Execution, activate
from pincer.runtimes.wasm.limits import MIB, WasmLimits
from pincer.runtimes.wasm.records import ToolRequest
from pincer.runtimes.wasm.wit import TOOL_INTERFACE, check_component_interfaces

if TYPE_CHECKING:
    import wasmtime
    from wasmtime.component import Component, ExportIndex, Instance, Linker
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    wasmtime = require("wasm", "wasmtime")
    _component = require("wasm", "wasmtime.component")
    Component, Linker = _component.Component, _component.Linker

__all__ = ["ToolComponent", "RawResponse", "classify_trap"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class RawResponse:
    """What ``execute`` returned, with what it cost."""

    output: str | None
    error: str | None
    fuel_used: int
    duration_ms: float


class ToolComponent:
    """A component checked against ``near:agent@0.3.0``, ready to instantiate on ``linker``."""

    def __init__(
        self, *, name: str, component: Component, digest: str, engine: wasmtime.Engine, linker: Linker
    ) -> None:
        self.name = name
        self.component = component
        self.digest = digest
        self._linker = linker
        ctype = component.type
        self.needs_wasi = check_component_interfaces(
            ctype.imports(engine).keys(), ctype.exports(engine).keys(), source=f"component {name!r}"
        )
        # the interface's exported name may carry an older patch version than ours
        iface_name = next(n for n in ctype.exports(engine) if n.startswith("near:agent/tool@"))
        iface = component.get_export_index(iface_name)
        self._exports: dict[str, ExportIndex] = {}
        for func in ("execute", "schema", "description"):
            idx = component.get_export_index(func, iface) if iface is not None else None
            if idx is None:
                raise RuntimeUnavailable(
                    f"component {name!r} does not export {func} from {TOOL_INTERFACE}",
                    hint="build it for world sandboxed-tool with the bundled WIT",
                )
            self._exports[func] = idx

    # ------------------------------------------------------------------------------ calls

    def describe(self, limits: WasmLimits) -> tuple[str, str]:
        """``(description(), schema())`` from one fresh instance, under ``limits``."""
        execution = Execution(tool=self.name, limits=limits, deadline=time.monotonic() + limits.timeout_s)
        with activate(execution):
            store = self._new_store(limits, limits.timeout_s)
            try:
                instance = self._linker.instantiate(store, self.component)
                description = self._call(store, instance, "description")
                schema = self._call(store, instance, "schema")
            except wasmtime.WasmtimeError as exc:
                raise classify_trap(exc, tool=self.name, limits=limits, timeout_s=limits.timeout_s) from None
            finally:
                store.close()
        if not isinstance(description, str) or not isinstance(schema, str):
            raise RuntimeUnavailable(f"component {self.name!r}: description() and schema() must return strings")
        return description, schema

    def execute(self, execution: Execution, params_json: str, context_json: str | None = None) -> RawResponse:
        """Run ``execute`` once in a fresh store; raises ToolError/ToolTimeout on a trap."""
        limits = execution.limits
        timeout_s = max(0.0, execution.deadline - time.monotonic())
        started = time.perf_counter()
        with activate(execution):
            store = self._new_store(limits, timeout_s)
            try:
                instance = self._linker.instantiate(store, self.component)
                request = ToolRequest(params=params_json, context=context_json)
                response = self._call(store, instance, "execute", request)
                fuel_used = limits.fuel - store.get_fuel()
            except wasmtime.WasmtimeError as exc:
                configured = execution.timeout_s or timeout_s
                raise classify_trap(exc, tool=self.name, limits=limits, timeout_s=configured) from None
            finally:
                store.close()
        output = getattr(response, "output", None)
        error = getattr(response, "error", None)
        return RawResponse(
            output=output if isinstance(output, str) else None,
            error=error if isinstance(error, str) else None,
            fuel_used=fuel_used,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )

    # ------------------------------------------------------------------------------ helpers

    def _new_store(self, limits: WasmLimits, timeout_s: float) -> wasmtime.Store:
        store = wasmtime.Store(self._linker.engine)
        store.set_limits(memory_size=limits.memory_bytes)
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(deadline_ticks(timeout_s, limits.tick_ms))
        if self.needs_wasi:
            store.set_wasi(wasmtime.WasiConfig())  # empty: no args, env, preopens; stdio closed
        return store

    def _call(self, store: wasmtime.Store, instance: Instance, name: str, *args: object) -> Any:
        func = instance.get_func(store, self._exports[name])
        if func is None:
            raise RuntimeUnavailable(f"component {self.name!r}: export {name} is not a function")
        result = func(store, *args)
        func.post_return(store)
        return result


def deadline_ticks(timeout_s: float, tick_ms: int) -> int:
    """Epoch ticks for ``timeout_s``; at least one so a spent deadline still traps promptly."""
    return max(1, math.ceil(timeout_s * 1000.0 / tick_ms))


_FUEL = "all fuel consumed"
_EPOCH = "interrupt"
_MEMORY_MARKERS = ("memory minimum size", "exceeds memory limits", "memory limit", "resource limit exceeded")


def classify_trap(exc: wasmtime.WasmtimeError, *, tool: str, limits: WasmLimits, timeout_s: float) -> ToolError:
    """A ToolError naming the limit behind a wasmtime trap (the cause is the message's last line)."""
    text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    cause = lines[-1] if lines else type(exc).__name__
    lowered = text.lower()
    if _FUEL in lowered:
        return ToolError(
            f"tool {tool!r} ran out of fuel: it used its limit of {limits.fuel:,} units",
            hint="the tool loops too long; raise limits.fuel in its capabilities if the work is legitimate",
        )
    if cause.endswith(_EPOCH):  # "wasm trap: interrupt": the epoch deadline
        return ToolTimeout(
            f"tool {tool!r} exceeded its deadline of {timeout_s:.3g} s and was interrupted",
            hint="raise limits.timeout_s in its capabilities or the call's timeout",
        )
    if any(marker in lowered for marker in _MEMORY_MARKERS):
        return ToolError(
            f"tool {tool!r} hit its memory limit of {limits.memory_bytes // MIB} MiB",
            hint="raise limits.memory_mb in its capabilities (Python guests need about 16 MiB)",
        )
    if "unreachable" in lowered:
        return ToolError(
            f"tool {tool!r} crashed (wasm trap: {cause}); a guest panic or an allocation beyond "
            f"its memory limit of {limits.memory_bytes // MIB} MiB ends this way",
            hint="check the tool's logs; raise limits.memory_mb in its capabilities file if it needs more memory",
        )
    if "host function" in lowered:
        return ToolError(f"tool {tool!r} trapped in a host call: {cause}")
    return ToolError(f"tool {tool!r} trapped: {cause}")


def parse_output(raw: RawResponse, *, tool: str, max_bytes: int) -> Any:
    """The tool's JSON output as a value; ToolError when it is not JSON or too large."""
    if raw.output is None:
        return None
    if len(raw.output.encode("utf-8")) > max_bytes:
        raise ToolError(
            f"tool {tool!r} returned {len(raw.output):,} bytes, over the limit of {max_bytes:,}",
            hint="ask the tool for less data: a WASM tool's raw output is capped at 1 MiB, whatever the config",
        )
    try:
        return json.loads(raw.output)
    except ValueError:
        raise ToolError(
            f"tool {tool!r} returned output that is not JSON", hint="the tool must return json.dumps(...)"
        ) from None
