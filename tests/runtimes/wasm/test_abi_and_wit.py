"""The list<u8> fast path on real C value arrays, and the WIT version rules on real components."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wasmtime import _ffi as ffi
from wasmtime.component import Component

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.wasm.abi import VAL_SIZE, lift_bytes, lower_bytes
from pincer.runtimes.wasm.component import ToolComponent
from pincer.runtimes.wasm.engine import new_engine
from pincer.runtimes.wasm.host import build_linker
from pincer.runtimes.wasm.wit import check_component_interfaces, check_version, parse_version


@given(st.binary(max_size=4096))
def test_bytes_lowered_in_bulk_are_the_element_values_wasmtime_reads(data: bytes) -> None:
    value = ffi.wasmtime_component_val_t()
    lower_bytes(data, ctypes.pointer(value))
    assert value.kind == ffi.WASMTIME_COMPONENT_LIST.value
    assert value.of.list.size == len(data)
    # element by element, as wasmtime-py's own (slow) converter reads them
    for i, byte in enumerate(data):
        element = value.of.list.data[i]
        assert element.kind == ffi.WASMTIME_COMPONENT_U8.value
        assert element.of.u8 == byte
    assert lift_bytes(value) == data  # and the bulk read gives them back (and frees the array)
    assert value.of.list.size == 0


def test_bulk_read_of_a_list_wasmtime_built_element_by_element() -> None:
    data = bytes(range(256)) * 3
    value = ffi.wasmtime_component_val_t()
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, len(data))
    for i, byte in enumerate(data):
        raw.data[i].kind = ffi.WASMTIME_COMPONENT_U8
        raw.data[i].of.u8 = byte
    value.kind = ffi.WASMTIME_COMPONENT_LIST
    value.of.list = raw
    assert VAL_SIZE == 32
    assert lift_bytes(value) == data


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("0.3.0", True),
        ("0.3.0-rc1", True),
        ("0.2.9", False),  # 0.x: the minor version must match
        ("0.4.0", False),
        ("0.3.1", False),  # newer than the host
        ("1.3.0", False),  # major differs
        ("3", False),
        ("", False),
    ],
)
def test_wit_version_rule(version: str, ok: bool) -> None:
    if ok:
        assert check_version(version, source="t") == parse_version(version)
    else:
        with pytest.raises(RuntimeUnavailable) as caught:
            check_version(version, source="t")
        assert "0.3.0" in str(caught.value)  # the hint names the host's version when the message cannot


@given(st.text(max_size=40))
def test_parse_version_never_raises(text: str) -> None:
    result = parse_version(text)
    assert result is None or all(isinstance(part, int) and part >= 0 for part in result)


def _component(imports: str, export: str) -> Component:
    wat = f'(component {imports} (instance $i) (export "{export}" (instance $i)))'
    return Component(ENGINE, wat)


ENGINE = new_engine()
LINKER = build_linker(ENGINE)


@pytest.mark.parametrize(
    ("imports", "export", "message"),
    [
        ('(import "near:agent/host@0.4.0" (instance))', "near:agent/tool@0.4.0",
         "built for near:agent@0.4.0 but this host implements near:agent@0.3.0"),
        ('(import "near:agent/host@0.2.0" (instance))', "near:agent/tool@0.3.0",
         "built for near:agent@0.2.0 but this host implements near:agent@0.3.0"),
        ("", "near:agent/tool@1.0.0", "built for near:agent@1.0.0 but this host implements near:agent@0.3.0"),
        ('(import "acme:evil/net@1.0.0" (instance))', "near:agent/tool@0.3.0", "imports acme:evil/net@1.0.0"),
        ("", "acme:other/tool@0.3.0", "does not export near:agent/tool"),
    ],
)  # fmt: skip
def test_components_for_another_wit_are_refused_naming_both_versions(imports: str, export: str, message: str) -> None:
    component = _component(imports, export)
    with pytest.raises(RuntimeUnavailable) as caught:
        ToolComponent(name="t", component=component, digest="0", engine=ENGINE, linker=LINKER)
    assert message in caught.value.message


def test_a_compatible_component_missing_a_function_is_refused() -> None:
    component = _component('(import "near:agent/host@0.3.0" (instance))', "near:agent/tool@0.3.0")
    with pytest.raises(RuntimeUnavailable, match="does not export execute"):
        ToolComponent(name="t", component=component, digest="0", engine=ENGINE, linker=LINKER)


def test_wasi_imports_are_accepted_and_reported() -> None:
    assert check_component_interfaces(
        ["near:agent/host@0.3.0", "wasi:io/streams@0.2.0"], ["near:agent/tool@0.3.0"], source="t"
    )
    assert not check_component_interfaces(["near:agent/host@0.3.0"], ["near:agent/tool@0.3.0"], source="t")
