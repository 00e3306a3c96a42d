"""The on-disk compile cache: compiled once, keyed by wasm + wasmtime version + engine settings,
corrupt or foreign entries rebuilt. Small components in component text keep these tests fast;
the last test shows a real Python guest loading from the cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import wasmtime
from wasmtime.component import Component

from pincer.runtimes.wasm import cache as cache_module
from pincer.runtimes.wasm.cache import CompileCache, wasm_digest
from pincer.runtimes.wasm.engine import engine_fingerprint, new_engine

pytestmark = pytest.mark.anyio

WAT = """
(component
  (core module $m (func (export "f") (result i32) (i32.const 42)))
  (core instance $i (instantiate $m))
  (func $f (result u32) (canon lift (core func $i "f")))
  (export "answer" (func $f))
)
"""


@pytest.fixture
def wasm() -> bytes:
    return wasmtime.wat2wasm(WAT)


def answer(engine: wasmtime.Engine, component: Component) -> int:
    store = wasmtime.Store(engine)
    store.set_fuel(1_000_000)
    store.set_epoch_deadline(1_000_000)
    instance = wasmtime.component.Linker(engine).instantiate(store, component)
    return instance.get_func(store, "answer")(store)


def test_compiles_once_then_loads_from_disk(tmp_path: Path, wasm: bytes) -> None:
    engine = new_engine()
    first = CompileCache(tmp_path, engine)
    component, digest = first.load(wasm)
    assert digest == hashlib.sha256(wasm).hexdigest()
    assert (first.stats.misses, first.stats.hits) == (1, 0)
    assert answer(engine, component) == 42
    entry = first.entry_path(digest)
    meta = json.loads(entry.with_suffix(".json").read_text())
    assert meta["size"] == entry.stat().st_size and meta["engine"] == engine_fingerprint()

    second = CompileCache(tmp_path, new_engine())  # another process would see the same
    second.load(wasm)
    assert (second.stats.misses, second.stats.hits, second.stats.rebuilt) == (0, 1, 0)


@pytest.mark.parametrize("damage", ["garbage", "truncate", "flip_byte", "no_meta", "bad_meta"])
def test_a_corrupt_entry_is_rebuilt(tmp_path: Path, wasm: bytes, damage: str) -> None:
    engine = new_engine()
    cache = CompileCache(tmp_path, engine)
    _, digest = cache.load(wasm)
    entry = cache.entry_path(digest)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x7fELF not a compiled component")
    elif damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":
        entry.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "no_meta":
        entry.with_suffix(".json").unlink()
    else:
        entry.with_suffix(".json").write_text("{not json")
    fresh = CompileCache(tmp_path, engine)
    component, _ = fresh.load(wasm)
    assert answer(engine, component) == 42
    assert fresh.stats.hits == 0 and fresh.stats.misses == 1
    assert fresh.stats.rebuilt == 1
    later = CompileCache(tmp_path, engine)  # the rebuilt entry is whole again
    assert answer(engine, later.load(wasm)[0]) == 42
    assert (later.stats.hits, later.stats.rebuilt) == (1, 0)


def test_an_entry_compiled_under_another_engine_config_is_rebuilt(tmp_path: Path, wasm: bytes) -> None:
    engine = new_engine()
    cache = CompileCache(tmp_path, engine)
    entry = cache.entry_path(wasm_digest(wasm))
    foreign = bytes(Component(wasmtime.Engine(), wasm).serialize())  # no fuel, no epochs
    entry.write_bytes(foreign)
    entry.with_suffix(".json").write_text(
        json.dumps({"size": len(foreign), "sha256": hashlib.sha256(foreign).hexdigest()})
    )
    component, _ = cache.load(wasm)
    assert cache.stats.rebuilt == 1
    assert answer(engine, component) == 42


def test_the_key_covers_the_wasmtime_version_and_engine_settings(
    tmp_path: Path, wasm: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = new_engine()
    digest = wasm_digest(wasm)
    before = CompileCache(tmp_path, engine).entry_path(digest)
    assert "wasmtime=" in engine_fingerprint() and "consume_fuel=True" in engine_fingerprint()
    monkeypatch.setattr(cache_module, "engine_fingerprint", lambda: "wasmtime=99.0.0;x86_64;consume_fuel=True")
    after = CompileCache(tmp_path, engine).entry_path(digest)
    assert before != after


def test_drop_removes_the_entry(tmp_path: Path, wasm: bytes) -> None:
    cache = CompileCache(tmp_path, new_engine())
    _, digest = cache.load(wasm)
    assert cache.drop(digest) is True
    assert not cache.entry_path(digest).exists()
    assert cache.drop(digest) is False
    assert CompileCache(tmp_path, None).drop(digest) is False


def test_not_a_component_is_a_clear_error(tmp_path: Path) -> None:
    from pincer.core.errors import RuntimeUnavailable

    with pytest.raises(RuntimeUnavailable, match="not a valid WebAssembly component"):
        CompileCache(tmp_path, new_engine()).load(b"\x00asm\x01\x00\x00\x00", source="mod.wasm")
    assert list(tmp_path.iterdir()) == []


async def test_a_real_guest_is_compiled_once_across_runtimes(wasm_runtime, pincer_home, wasm_compile_cache) -> None:
    from pincer.runtimes.wasm.runtime import WasmRuntime

    await wasm_runtime({"echo": None})
    second = WasmRuntime(pincer_home, cache_dir=wasm_compile_cache)
    await second.start()
    try:
        assert [s.name for s in second.tools()] == ["echo"]
        assert second.cache.stats.hits == 1 and second.cache.stats.misses == 0
    finally:
        await second.aclose()
