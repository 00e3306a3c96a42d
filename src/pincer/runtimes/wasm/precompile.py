"""Compiling components ahead of their first call, for the builder's runner and the hub's installs.

A home's compile cache (``$PINCER_HOME/cache/wasm``) holds one artifact per component digest;
these functions fill, probe and prune it without the caller knowing the cache's or the engine's
types. Each imports wasmtime when called, not when this module is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pincer.runtimes.wasm.install import SourceFiles, cache_dir
from pincer.runtimes.wasm.runner_tool import read_runner_source

__all__ = ["compiled_entry", "compile_into", "compile_tool", "drop_compiled"]


def compiled_entry(directory: Path, digest: str) -> Path:
    """Where the compile cache in ``directory`` keeps the artifact of the component ``digest``."""
    from pincer.runtimes.wasm.cache import CompileCache

    return CompileCache(directory, None).entry_path(digest)


def compile_into(directory: Path, wasm: bytes, *, source: str) -> None:
    """Compile ``wasm`` into the cache in ``directory`` unless it is there (``source`` names it in errors)."""
    from pincer.runtimes.wasm.cache import CompileCache
    from pincer.runtimes.wasm.engine import new_engine

    CompileCache(directory, new_engine()).load(wasm, source=source)


def compile_tool(home: Path, files: SourceFiles, *, wasm_path: Path, step: Callable[[str], None]) -> tuple[str, bool]:
    """Check and compile an installed tool's component into ``home``'s cache, as a load would:
    (its digest, whether the cache held it already). ``wasm_path`` is where it lies on disk (a
    runner-built tool's recorded source sits beside it); ``step`` hears "compiling"."""
    from pincer.runtimes.wasm.cache import wasm_digest
    from pincer.runtimes.wasm.runtime import WasmHost

    host = WasmHost(home)
    digest = wasm_digest(files.wasm)
    was_there = host.cache.entry_path(digest).exists()
    step("compiling")
    host.load(files, progress=None, runner=read_runner_source(wasm_path, files.name))
    return digest, was_there


def drop_compiled(home: Path, digest: str) -> None:
    """Remove the artifact of ``digest`` from ``home``'s compile cache (absent is fine)."""
    from pincer.runtimes.wasm.cache import CompileCache

    CompileCache(cache_dir(home), None).drop(digest)
