"""wasmtime component host for ``near:agent@0.3.0`` tools: limits, compile cache, host imports."""

from pincer.runtimes.wasm.limits import WasmLimits
from pincer.runtimes.wasm.runtime import WasmRuntime

__all__ = ["WasmLimits", "WasmRuntime"]
