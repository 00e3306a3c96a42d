"""Host functions on the component linker, with a fast path for ``list<u8>``.

wasmtime-py lifts and lowers ``list<u8>`` one element at a time through Python (~1 us per byte
each way). Each element of a component value list is a fixed-size ``wasmtime_component_val_t``
(32 bytes: the kind byte at offset 0, the payload at offset 8), so a byte list can be read with
one strided copy out of the C array and written with two strided copies into it. This module
registers host functions with its own C callback that does that for every ``list<u8>`` it meets
inside options, results and records, and hands every other type to wasmtime-py's converters.

Contract of :func:`add_host_func`: ``fn(*args)`` receives the lifted WIT arguments (no store),
must not raise (a raise becomes a trap naming the function, never a Python exception parked in
wasmtime-py's global), and returns the value to lower: ``Variant("ok"|"err", payload)`` for a
``result``, ``Record``-like objects (attribute access) for records, ``bytes`` for ``list<u8>``.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pincer.core.errors import RuntimeUnavailable
from pincer.core.extras import require

if TYPE_CHECKING:
    import wasmtime
    from wasmtime import _ffi as ffi
    from wasmtime.component import U8, ListType, OptionType, RecordType, ResultType, ValType, Variant
    from wasmtime.component._types import FuncType
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    wasmtime = require("wasm", "wasmtime")
    ffi = require("wasm", "wasmtime._ffi")
    _component = require("wasm", "wasmtime.component")
    U8, ListType, OptionType = _component.U8, _component.ListType, _component.OptionType
    RecordType, ResultType, ValType, Variant = (
        _component.RecordType, _component.ResultType, _component.ValType, _component.Variant
    )
    FuncType = require("wasm", "wasmtime.component._types").FuncType

__all__ = ["add_host_func", "set_fast_bytes", "lift_bytes", "lower_bytes", "VAL_SIZE", "WASMTIME_INTERNALS"]

# Every private part of wasmtime-py (50.x) this module reaches, as (owner, attribute): the C
# bindings in ``wasmtime._ffi``, ``FuncType._from_ptr``, ``ResultType._tagged``,
# ``WasmtimeError._consume`` and ``StoreContext._invalidate``. This is the one module that uses
# them; tests/runtimes/wasm/test_wasmtime_compat.py checks each still exists with the layout
# assumed here, so an upgrade that moves one fails that test by name.
WASMTIME_INTERNALS: tuple[tuple[Any, str], ...] = (
    (ffi, "wasmtime_component_val_t"),
    (ffi, "wasmtime_component_vallist_t"),
    (ffi, "wasmtime_component_valrecord_t"),
    (ffi, "wasmtime_component_val_new"),
    (ffi, "wasmtime_component_val_delete"),
    (ffi, "wasmtime_component_vallist_new_uninit"),
    (ffi, "wasmtime_component_vallist_delete"),
    (ffi, "wasmtime_component_valrecord_new_uninit"),
    (ffi, "wasmtime_component_valrecord_delete"),
    (ffi, "wasmtime_component_func_callback_t"),
    (ffi, "wasmtime_component_linker_instance_add_func"),
    (ffi, "str_to_capi"),
    (ffi, "WASMTIME_COMPONENT_U8"),
    (ffi, "WASMTIME_COMPONENT_LIST"),
    (ffi, "WASMTIME_COMPONENT_BOOL"),
    (ffi, "WASMTIME_COMPONENT_RECORD"),
    (ffi, "WASMTIME_COMPONENT_RESULT"),
    (FuncType, "_from_ptr"),
    (ResultType, "_tagged"),
    (wasmtime.WasmtimeError, "_consume"),
    (wasmtime.StoreContext, "_invalidate"),
)

logger = logging.getLogger(__name__)

VAL_SIZE = ctypes.sizeof(ffi.wasmtime_component_val_t)
_KIND_OFFSET = ffi.wasmtime_component_val_t.kind.offset
_PAYLOAD_OFFSET = ffi.wasmtime_component_val_t.of.offset
_KIND_U8 = ffi.WASMTIME_COMPONENT_U8.value
_KIND_LIST = ffi.WASMTIME_COMPONENT_LIST.value
_KIND_BOOL = ffi.WASMTIME_COMPONENT_BOOL.value

# The layout the fast path relies on; a wasmtime release that changes it must fail loudly here,
# not corrupt values at run time.
if VAL_SIZE != 32 or _KIND_OFFSET != 0 or _PAYLOAD_OFFSET != 8:  # pragma: no cover
    raise RuntimeUnavailable(
        f"wasmtime_component_val_t layout changed (size {VAL_SIZE}, kind@{_KIND_OFFSET}, payload@{_PAYLOAD_OFFSET})",
        hint="pin wasmtime to the version pincer was tested with (50.x)",
    )

_fast = {"enabled": True}
_FUNCS: dict[int, tuple[str, Callable[..., Any]]] = {}
_FUNCS_LOCK = threading.Lock()
_next_id = [1]


def set_fast_bytes(enabled: bool) -> bool:
    """Turn the fast path on or off process-wide (benchmarks compare both); returns the old setting."""
    old = _fast["enabled"]
    _fast["enabled"] = bool(enabled)
    return old


def _is_fast() -> bool:
    return _fast["enabled"]


def _address(array: ctypes._Pointer[ffi.wasmtime_component_val_t]) -> int:
    """Where a non-empty list's element array starts (wasmtime allocates one for every size > 0)."""
    addr = ctypes.cast(array, ctypes.c_void_p).value
    if addr is None:
        raise RuntimeUnavailable(
            "wasmtime gave a non-empty list<u8> no element array",
            hint="pin wasmtime to the version pincer was tested with (50.x)",
        )
    return addr


def lift_bytes(c: ffi.wasmtime_component_val_t) -> bytes:
    """Read a ``list<u8>`` value in bulk and release its element array."""
    lst = c.of.list
    size = lst.size
    try:
        if size == 0:
            return b""
        addr = _address(lst.data)
        raw = (ctypes.c_ubyte * (size * VAL_SIZE)).from_address(addr)
        return memoryview(raw).cast("B")[_PAYLOAD_OFFSET::VAL_SIZE].tobytes()
    finally:
        ffi.wasmtime_component_vallist_delete(ctypes.byref(lst))


def lower_bytes(data: bytes | bytearray | memoryview, ptr: Any) -> None:
    """Write ``data`` as a ``list<u8>`` value into ``*ptr`` with two strided copies."""
    size = len(data)
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, size)
    if size:
        addr = _address(raw.data)
        # Only the kind byte and the u8 payload are ever read for a U8 value; the other 30 bytes
        # of each element may stay as allocated (zeroing them would cost a third of the time).
        view = memoryview((ctypes.c_ubyte * (size * VAL_SIZE)).from_address(addr)).cast("B")
        view[_KIND_OFFSET::VAL_SIZE] = bytes((_KIND_U8,)) * size
        view[_PAYLOAD_OFFSET::VAL_SIZE] = data
    ptr.contents.kind = _KIND_LIST
    ptr.contents.of.list = raw


def _is_bytes(ty: ValType) -> bool:
    return isinstance(ty, ListType) and isinstance(ty.element, U8)


def _lift(ty: ValType, c: ffi.wasmtime_component_val_t) -> Any:
    if not _is_fast():
        return ty.convert_from_c(c)
    if _is_bytes(ty):
        return lift_bytes(c)
    if isinstance(ty, OptionType):
        boxed = c.of.option
        if not boxed:
            return None
        payload = _lift(ty.payload, boxed.contents)
        # the payload is consumed; mark it empty so deleting the box frees nothing twice
        boxed.contents.kind = _KIND_BOOL
        boxed.contents.of.boolean = False
        ffi.wasmtime_component_val_delete(boxed)
        return payload
    return ty.convert_from_c(c)


def _lower(store: Any, ty: ValType, val: Any, ptr: Any) -> None:
    if not _is_fast():
        # wasmtime-py wants an untagged result (ok and err of different Python types) as the bare value
        if isinstance(ty, ResultType) and isinstance(val, Variant) and not ty._tagged():
            val = val.payload
        ty.convert_to_c(store, val, ptr)
        return
    if _is_bytes(ty):
        if not isinstance(val, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes for list<u8>, got {type(val).__name__}")
        lower_bytes(val, ptr)
        return
    if isinstance(ty, ResultType):
        if not isinstance(val, Variant) or val.tag not in ("ok", "err"):
            raise TypeError("a result must be returned as Variant('ok'|'err', payload)")
        is_ok = val.tag == "ok"
        inner_ty = ty.ok if is_ok else ty.err
        boxed = None
        if inner_ty is not None:
            tmp = ffi.wasmtime_component_val_t()
            _lower(store, inner_ty, val.payload, ctypes.pointer(tmp))
            boxed = ffi.wasmtime_component_val_new(ctypes.byref(tmp))
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_RESULT
        ptr.contents.of.result.is_ok = is_ok
        ptr.contents.of.result.val = boxed
        return
    if isinstance(ty, RecordType):
        fields = ty.fields
        raw = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(raw, len(fields))
        done = 0
        try:
            for name, field_ty in fields:
                _lower(store, field_ty, getattr(val, name), ctypes.pointer(raw.data[done].val))
                raw.data[done].name = ffi.str_to_capi(name)
                done += 1
        except BaseException:
            for j in range(done, len(fields)):
                raw.data[j].val.kind = _KIND_BOOL
                raw.data[j].val.of.boolean = False
            ffi.wasmtime_component_valrecord_delete(ctypes.byref(raw))
            raise
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_RECORD
        ptr.contents.of.record = raw
        return
    ty.convert_to_c(store, val, ptr)


def _callback(
    data: int | None,
    context: ctypes._Pointer[ffi.wasmtime_context_t],
    ty_raw: ctypes._Pointer[ffi.wasmtime_component_func_type_t],
    args: ctypes._Pointer[ffi.wasmtime_component_val_t],
    nargs: int,
    results: ctypes._Pointer[ffi.wasmtime_component_val_t],
    nresults: int,
) -> int | None:  # 0, or the address of the wasmtime_error_t that becomes the trap
    store = wasmtime.StoreContext(context)
    name = "?"
    try:
        name, fn = _FUNCS[data or 0]
        with FuncType._from_ptr(ty_raw, owner=store) as fty:
            params = fty.params
            result_ty = fty.result
            if len(params) != nargs:
                raise TypeError(f"expected {len(params)} arguments, got {nargs}")
            pyargs = [_lift(ty, args[i]) for i, (_, ty) in enumerate(params)]
            value = fn(*pyargs)
            if result_ty is not None and nresults == 1:
                _lower(store, result_ty, value, results)
        return 0
    except BaseException as exc:  # never let Python unwind through the C frame  # noqa: BLE001
        logger.warning("host function %s failed: %s", name, type(exc).__name__)
        err = wasmtime.WasmtimeError(f"host function {name} failed: {type(exc).__name__}")
        return ctypes.cast(err._consume(), ctypes.c_void_p).value
    finally:
        store._invalidate()


def _finalize(data: int | None) -> None:
    with _FUNCS_LOCK:
        _FUNCS.pop(data or 0, None)


# The C function pointers wasmtime calls; module globals, so they live as long as any linker.
_C_CALLBACK = ffi.wasmtime_component_func_callback_t(_callback)
_C_FINALIZE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_finalize)


def add_host_func(instance: Any, name: str, fn: Callable[..., Any]) -> None:
    """Define ``name`` in a ``LinkerInstance`` (from ``root.add_instance(...)``) as ``fn``."""
    with _FUNCS_LOCK:
        key = _next_id[0]
        _next_id[0] += 1
        _FUNCS[key] = (name, fn)
    encoded = name.encode("utf-8")
    err = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(encoded), len(encoded), _C_CALLBACK, key, _C_FINALIZE
    )
    if err:
        with _FUNCS_LOCK:
            _FUNCS.pop(key, None)
        raise RuntimeUnavailable(
            f"cannot define host function {name}: {wasmtime.WasmtimeError._from_ptr(err)}",
            hint="the bundled WIT and the linker disagree; reinstall pincer",
        )
