"""Host functions on the linker, called by real (small, hand-written) components: a failing host
function traps with its name instead of raising into wasmtime; WASI is there for wasip2 builds;
workspace paths never leave the workspace."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st
from wasmtime.component import Component, Linker
from wasmtime.component import _enter as wasmtime_enter

from pincer.runtimes.wasm.abi import add_host_func
from pincer.runtimes.wasm.engine import new_engine
from pincer.runtimes.wasm.host import build_linker, decode_headers, resolve_workspace_path

ENGINE = new_engine()
FUEL = 1_000_000


def caller_of(interface: str, function: str) -> Component:
    """A component whose export ``run`` returns what the imported ``function: func() -> u64`` does."""
    return Component(
        ENGINE,
        f"""
(component
  (import "{interface}" (instance $host (export "{function}" (func (result u64)))))
  (core func $f (canon lower (func $host "{function}")))
  (core module $m
    (import "host" "f" (func $f (result i64)))
    (func (export "run") (result i64) (call $f)))
  (core instance $i (instantiate $m (with "host" (instance (export "f" (func $f))))))
  (func $run (result u64) (canon lift (core func $i "run")))
  (export "run" (func $run))
)""",
    )


def run(linker: Linker, component: Component, *, wasi: bool = False) -> int:
    store = wasmtime.Store(ENGINE)
    store.set_fuel(FUEL)
    store.set_epoch_deadline(FUEL)
    if wasi:
        store.set_wasi(wasmtime.WasiConfig())
    instance = linker.instantiate(store, component)
    return instance.get_func(store, "run")(store)


def test_now_millis_is_the_wall_clock() -> None:
    before = time.time_ns() // 1_000_000
    value = run(build_linker(ENGINE), caller_of("near:agent/host@0.3.0", "now-millis"))
    assert before <= value <= time.time_ns() // 1_000_000


def test_a_failing_host_function_traps_naming_itself_and_raises_nothing_into_wasmtime() -> None:
    broken = Linker(ENGINE)
    with broken.root() as root, root.add_instance("near:agent/host@0.3.0") as host:
        add_host_func(host, "now-millis", lambda: 1 // 0)
    component = caller_of("near:agent/host@0.3.0", "now-millis")
    with pytest.raises(wasmtime.WasmtimeError) as caught:
        run(broken, component)
    assert "host function now-millis failed: ZeroDivisionError" in str(caught.value)
    assert wasmtime_enter.LAST_EXCEPTION is None  # nothing parked in wasmtime-py's global
    assert run(build_linker(ENGINE), component) > 0  # and the next call, in a fresh store, works


def test_a_host_function_returning_the_wrong_type_traps_too() -> None:
    broken = Linker(ENGINE)
    with broken.root() as root, root.add_instance("near:agent/host@0.3.0") as host:
        add_host_func(host, "now-millis", lambda: "not a number")
    with pytest.raises(wasmtime.WasmtimeError, match="host function now-millis failed: TypeError"):
        run(broken, caller_of("near:agent/host@0.3.0", "now-millis"))
    assert wasmtime_enter.LAST_EXCEPTION is None


def test_wasip2_components_get_an_empty_wasi_context() -> None:
    value = run(build_linker(ENGINE), caller_of("wasi:clocks/monotonic-clock@0.2.0", "now"), wasi=True)
    assert value > 0


SEGMENT = st.sampled_from(["a", "b", "..", ".", "", "notes", "link", "sideways", "/", "\\", "x\x00", "%2e%2e"])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """notes/b and a/b are files; notes/link and link are symlinks to outside the workspace."""
    root = tmp_path_factory.mktemp("ws")
    (root / "notes").mkdir()
    (root / "a").mkdir()
    (root / "notes" / "b").write_text("b")
    (root / "a" / "b").write_text("b")
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("outside")
    (root / "notes" / "link").symlink_to(outside)
    (root / "link").symlink_to(outside.parent)
    (root / "notes" / "sideways").symlink_to(root / "a" / "b")  # inside the workspace, outside notes/
    return root


@settings(max_examples=300, deadline=None)
@given(path=st.lists(SEGMENT, max_size=6).map("/".join), prefixes=st.sampled_from([(), ("notes/",), ("a",)]))
def test_workspace_paths_never_leave_the_workspace(workspace: Path, path: str, prefixes: tuple[str, ...]) -> None:
    target = resolve_workspace_path(workspace, path, prefixes)
    if target is not None:
        assert target.is_file()
        assert workspace.resolve() in target.resolve().parents
        assert ".." not in Path(path).parts and not path.startswith("/")
        if prefixes:
            relative = target.relative_to(workspace.resolve()).as_posix()
            assert any(relative.startswith(p.rstrip("/") + "/") for p in prefixes)


def test_workspace_paths_that_are_allowed(workspace: Path) -> None:
    assert resolve_workspace_path(workspace, "notes/b", ("notes/",)) == (workspace / "notes" / "b").resolve()
    assert resolve_workspace_path(workspace, "./a/b", ()) == (workspace / "a" / "b").resolve()
    assert resolve_workspace_path(workspace, "a/b", ("notes/",)) is None
    assert resolve_workspace_path(workspace, "notes/link", ("notes/",)) is None
    assert resolve_workspace_path(workspace, "link/secret.txt", ()) is None
    assert resolve_workspace_path(workspace, "notes/sideways", ("notes/",)) is None
    assert resolve_workspace_path(workspace, "notes/sideways", ()) == (workspace / "a" / "b").resolve()


@given(st.one_of(st.text(max_size=60), st.dictionaries(st.text(max_size=5), st.text(max_size=5)).map(json.dumps)))
def test_headers_json_is_a_string_map_or_refused(text: str) -> None:
    headers = decode_headers(text)
    if headers is not None:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
