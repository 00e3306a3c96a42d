"""wasmtime component host for ``near:agent@0.3.0`` tools: limits, compile cache, host imports."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pincer.runtimes.wasm.limits import WasmLimits
    from pincer.runtimes.wasm.runtime import WasmRuntime

__all__ = ["WasmLimits", "WasmRuntime"]

# Imported on first use: the runtime pulls in wasmtime, which reading what is installed does not need.
_EXPORTS = {
    "WasmLimits": "pincer.runtimes.wasm.limits",
    "WasmRuntime": "pincer.runtimes.wasm.runtime",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
