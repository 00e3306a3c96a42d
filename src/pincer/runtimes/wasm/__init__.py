"""wasmtime component host for ``near:agent@0.3.0`` tools: limits, compile cache, host imports.

This package's names are the runtime's public surface, and the only part of it the builder and
the hub may use (``tests/test_import_graph.py``): read a tool's files, build a component from
Python, compile one ahead (:mod:`.precompile`), run the shared runner on a source
(:mod:`.sandbox`). Each is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pincer.runtimes.wasm.build import build_component, build_key, cached_build
    from pincer.runtimes.wasm.component import RawResponse
    from pincer.runtimes.wasm.install import SourceFiles, cache_dir, parse_capabilities, read_source, validate_name
    from pincer.runtimes.wasm.limits import WasmLimits
    from pincer.runtimes.wasm.precompile import compile_into, compile_tool, compiled_entry, drop_compiled
    from pincer.runtimes.wasm.runner_tool import BUILT_SUFFIX, RUNNER_PROTOCOL, RunnerSource, source_sha256
    from pincer.runtimes.wasm.runtime import WasmRuntime
    from pincer.runtimes.wasm.sandbox import RunnerSandbox

__all__ = [
    "BUILT_SUFFIX",
    "RUNNER_PROTOCOL",
    "RawResponse",
    "RunnerSandbox",
    "RunnerSource",
    "SourceFiles",
    "WasmLimits",
    "WasmRuntime",
    "build_component",
    "build_key",
    "cache_dir",
    "cached_build",
    "compile_into",
    "compile_tool",
    "compiled_entry",
    "drop_compiled",
    "parse_capabilities",
    "read_source",
    "source_sha256",
    "validate_name",
]

# Imported on first use: the runtime pulls in wasmtime, which reading what is installed does not need.
_EXPORTS = {
    "build_component": "pincer.runtimes.wasm.build",
    "build_key": "pincer.runtimes.wasm.build",
    "cached_build": "pincer.runtimes.wasm.build",
    "RawResponse": "pincer.runtimes.wasm.component",
    "SourceFiles": "pincer.runtimes.wasm.install",
    "cache_dir": "pincer.runtimes.wasm.install",
    "parse_capabilities": "pincer.runtimes.wasm.install",
    "read_source": "pincer.runtimes.wasm.install",
    "validate_name": "pincer.runtimes.wasm.install",
    "WasmLimits": "pincer.runtimes.wasm.limits",
    "compile_into": "pincer.runtimes.wasm.precompile",
    "compile_tool": "pincer.runtimes.wasm.precompile",
    "compiled_entry": "pincer.runtimes.wasm.precompile",
    "drop_compiled": "pincer.runtimes.wasm.precompile",
    "BUILT_SUFFIX": "pincer.runtimes.wasm.runner_tool",
    "RUNNER_PROTOCOL": "pincer.runtimes.wasm.runner_tool",
    "RunnerSource": "pincer.runtimes.wasm.runner_tool",
    "source_sha256": "pincer.runtimes.wasm.runner_tool",
    "WasmRuntime": "pincer.runtimes.wasm.runtime",
    "RunnerSandbox": "pincer.runtimes.wasm.sandbox",
}


__getattr__ = lazy_attributes(__name__, globals(), _EXPORTS)
