"""The private parts of wasmtime-py that runtimes/wasm/abi.py relies on are still there, with the
memory layout its bulk ``list<u8>`` path assumes. Fails by name on an upgrade that moves them."""

from __future__ import annotations

import ctypes

import pytest
from wasmtime import _ffi as ffi

from pincer.runtimes.wasm.abi import VAL_SIZE, WASMTIME_INTERNALS


@pytest.mark.parametrize(("owner", "name"), WASMTIME_INTERNALS, ids=[n for _, n in WASMTIME_INTERNALS])
def test_each_internal_still_exists(owner: object, name: str) -> None:
    assert hasattr(owner, name), f"wasmtime-py no longer has {getattr(owner, '__name__', owner)}.{name}: update abi.py"


def test_component_values_keep_the_layout_the_bulk_path_assumes() -> None:
    val = ffi.wasmtime_component_val_t
    assert VAL_SIZE == ctypes.sizeof(val) == 32
    assert val.kind.offset == 0 and val.of.offset == 8
    vallist = ffi.wasmtime_component_vallist_t
    assert {name for name, _ in vallist._fields_} >= {"size", "data"}
