"""wasmtime component host for ``near:agent@0.3.0`` tools: limits, compile cache, host imports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pincer.runtimes.wasm.limits import WasmLimits
    from pincer.runtimes.wasm.runtime import WasmRuntime

__all__ = ["WasmLimits", "WasmRuntime"]

# Imported on first use: the runtime pulls in wasmtime, which reading what is installed does not need.
_EXPORTS = {
    "WasmLimits": "pincer.runtimes.wasm.limits",
    "WasmRuntime": "pincer.runtimes.wasm.runtime",
}


__getattr__ = lazy_attributes(__name__, globals(), _EXPORTS)
