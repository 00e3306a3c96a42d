"""On-disk compile cache for components.

Compiling an 18 MB Python guest takes ~8 s; deserializing the cached artifact takes
milliseconds. An entry is keyed by sha256 of the wasm bytes, the wasmtime version and the
engine settings (:func:`pincer.runtimes.wasm.engine.engine_fingerprint`), so a wasmtime upgrade
or a config change misses instead of failing. Each entry ``KEY.cwasm`` has a sidecar
``KEY.json`` with the artifact's size and sha256, checked before wasmtime maps the file: a
truncated or altered entry is never handed to the deserializer, it is rebuilt. Writes go to a
temporary file renamed into place, so a crash leaves no half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pincer.core.errors import RuntimeUnavailable, StoreError
from pincer.core.extras import require
from pincer.runtimes.wasm.engine import engine_fingerprint
from pincer.store.jsonfile import write_bytes_atomic

if TYPE_CHECKING:
    import wasmtime
    from wasmtime.component import Component
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    wasmtime = require("wasm", "wasmtime")
    Component = require("wasm", "wasmtime.component").Component

__all__ = ["CompileCache", "CacheStats", "wasm_digest"]

logger = logging.getLogger(__name__)


def wasm_digest(wasm: bytes) -> str:
    return hashlib.sha256(wasm).hexdigest()


def _file_digest(path: Path) -> str:
    # hashing the mapped file avoids copying ~40 MB through Python buffers (half the cost)
    with path.open("rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return hashlib.sha256(b"").hexdigest()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest()


@dataclass(kw_only=True, slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    rebuilt: int = 0


class CompileCache:
    """Compiles components once per (wasm, wasmtime version, engine settings)."""

    def __init__(self, directory: Path, engine: wasmtime.Engine | None) -> None:
        """``engine`` may be None for a cache used only to ``drop`` entries."""
        self.directory = directory
        self._engine = engine
        self._fingerprint = engine_fingerprint()
        self.stats = CacheStats()

    def key(self, digest: str) -> str:
        return hashlib.sha256(f"{digest};{self._fingerprint}".encode()).hexdigest()

    def entry_path(self, digest: str) -> Path:
        return self.directory / f"{self.key(digest)}.cwasm"

    def load(self, wasm: bytes, *, source: str = "<component>") -> tuple[Component, str]:
        """The compiled component for ``wasm`` and its sha256; compiles and stores on a miss."""
        engine = self._engine
        if engine is None:
            raise RuntimeUnavailable("this compile cache was opened without an engine", hint="pass the engine")
        digest = wasm_digest(wasm)
        path = self.entry_path(digest)
        cached = self._read(path, engine)
        if cached is not None:
            self.stats.hits += 1
            return cached, digest
        self.stats.misses += 1
        try:
            component = Component(engine, wasm)
        except wasmtime.WasmtimeError as exc:
            raise RuntimeUnavailable(
                f"{source} is not a valid WebAssembly component: {_first_line(exc)}",
                hint="build it with `pincer wasm build` (componentize-py) or for wasm32-wasip2",
            ) from None
        self._write(path, component)
        return component, digest

    def drop(self, digest: str) -> bool:
        """Remove the entry of the wasm whose sha256 is ``digest``; True if there was one."""
        path = self.entry_path(digest)
        existed = path.exists()
        for p in (path, path.with_suffix(".json")):
            p.unlink(missing_ok=True)
        return existed

    def _read(self, path: Path, engine: wasmtime.Engine) -> Component | None:
        meta_path = path.with_suffix(".json")
        if not path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            size_ok = path.stat().st_size == meta["size"]
            if not size_ok or _file_digest(path) != meta["sha256"]:
                raise ValueError("size or digest mismatch")
            return Component.deserialize_file(engine, str(path))
        except (OSError, ValueError, KeyError, TypeError, wasmtime.WasmtimeError) as exc:
            logger.warning("compile cache entry %s is unusable (%s): rebuilding", path.name, type(exc).__name__)
            self.stats.rebuilt += 1
            for p in (path, meta_path):
                p.unlink(missing_ok=True)
            return None

    def _write(self, path: Path, component: Component) -> None:
        try:
            data = bytes(component.serialize())
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            meta = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "engine": self._fingerprint}
            write_bytes_atomic(path.with_suffix(".json"), json.dumps(meta).encode())
            write_bytes_atomic(path, data)
        except (OSError, StoreError, wasmtime.WasmtimeError) as exc:
            # the component works without its cache entry; the next load compiles again
            logger.warning("cannot write compile cache entry %s: %s", path, type(exc).__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
