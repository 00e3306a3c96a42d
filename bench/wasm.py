"""WASM runtime benchmark (run by hand: ``.venv/bin/python bench/wasm.py``).

Every figure is printed next to a baseline measured in the same run:

1. end-to-end execute with a fresh instance (``WasmRuntime.invoke`` of the echo guest, through a
   worker thread) against raw wasmtime-py instantiate + call of the same component on the same
   engine: p50 and p95, target <= 1.15x;
2. load time of an installed 18 MB Python guest from the compile cache against compiling it;
3. a 1 MB body round trip (guest -> host in http-request, host -> guest in the response,
   through a local HTTP echo server) with the list<u8> fast path off and on, target >= 18x,
   plus the host-side conversion alone;
4. throughput of a CPU-bound guest with one and with two worker threads.

Components come from the test cache (``.cache/wasm-test``), built now when missing (~30 s each).
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import Record

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from _stats import percentile  # noqa: E402
from pincer.core.values import HostContext  # noqa: E402
from pincer.runtimes.wasm import abi  # noqa: E402
from pincer.runtimes.wasm.build import cached_build  # noqa: E402
from pincer.runtimes.wasm.cache import CompileCache  # noqa: E402
from pincer.runtimes.wasm.component import deadline_ticks  # noqa: E402
from pincer.runtimes.wasm.install import read_source  # noqa: E402
from pincer.runtimes.wasm.limits import WasmLimits  # noqa: E402
from pincer.runtimes.wasm.runtime import WasmHost, WasmRuntime  # noqa: E402

CACHE = REPO / ".cache" / "wasm-test"
EXAMPLES = REPO / "examples" / "wasm"
E2E_CALLS = 1000
LOAD_RUNS = 5
BODY_BYTES = 1_000_000
SLOW_RUNS = 2
FAST_RUNS = 5
THROUGHPUT_CALLS = 40
THROUGHPUT_N = 30_000
CALL_TIMEOUT_S = 120.0


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def stats(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), percentile(samples, 95)


class EchoBody(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def host(name: str) -> HostContext:
    return HostContext(session="bench", tool=name, timeout_s=CALL_TIMEOUT_S)


async def bench_e2e(home: Path, echo: Path) -> None:
    runtime = WasmRuntime(home, cache_dir=CACHE / "compiled")
    await runtime.start()
    await runtime.install(echo, name="echo")
    spec = runtime.tools()[0]
    loaded = runtime.get("echo")
    tool = loaded.component
    limits = runtime.limits
    engine, linker = runtime._host.engine, runtime._host.linker
    execute_idx = tool._exports["execute"]

    def raw_call() -> None:
        store = wasmtime.Store(engine)
        store.set_limits(memory_size=limits.memory_bytes)
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(deadline_ticks(limits.timeout_s, limits.tick_ms))
        instance = linker.instantiate(store, tool.component)
        func = instance.get_func(store, execute_idx)
        request = Record()
        request.params = '{"message": "hi"}'
        request.context = None
        func(store, request)
        func.post_return(store)

    for _ in range(20):  # warm up both paths
        raw_call()
        await runtime.invoke(spec, {"message": "hi"}, host("echo"))
    raw, threaded, ours = [], [], []
    for _ in range(E2E_CALLS):  # interleaved, so drift affects all alike
        t0 = time.perf_counter()
        raw_call()
        raw.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await anyio.to_thread.run_sync(raw_call)
        threaded.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await runtime.invoke(spec, {"message": "hi"}, host("echo"))
        ours.append(time.perf_counter() - t0)
    await runtime.aclose()
    (r50, r95), (t50, t95), (o50, o95) = stats(raw), stats(threaded), stats(ours)
    print(f"\n1. execute(echo) with a fresh instance, {E2E_CALLS} sequential calls each, interleaved")
    print(f"   raw wasmtime-py instantiate+call   p50 {ms(r50)}   p95 {ms(r95)}   min {ms(min(raw))}")
    print(f"   the same on a worker thread        p50 {ms(t50)}   p95 {ms(t95)}   min {ms(min(threaded))}")
    print(f"   WasmRuntime.invoke                 p50 {ms(o50)}   p95 {ms(o95)}   min {ms(min(ours))}")
    print(
        f"   invoke / raw (target <= 1.15x)     p50 {o50 / r50:8.2f}x      p95 {o95 / r95:8.2f}x      min {min(ours) / min(raw):8.2f}x"
    )
    print(f"   invoke / raw on a worker thread    p50 {o50 / t50:8.2f}x      p95 {o95 / t95:8.2f}x")


def bench_load(home: Path, echo: Path) -> None:
    files = read_source(echo, name="echo")
    with tempfile.TemporaryDirectory() as fresh:
        t0 = time.perf_counter()
        WasmHost(home, cache_dir=Path(fresh)).load(files)
        compile_s = time.perf_counter() - t0
    loads, deserialize = [], []
    for _ in range(LOAD_RUNS):
        wasm_host = WasmHost(home, cache_dir=CACHE / "compiled")
        t0 = time.perf_counter()
        wasm_host.load(files)
        loads.append(time.perf_counter() - t0)
        path = wasm_host.cache.entry_path(wasm_host.cache.load(files.wasm)[1])
        t0 = time.perf_counter()
        wasmtime.component.Component.deserialize_file(wasm_host.engine, str(path))
        deserialize.append(time.perf_counter() - t0)
    load = statistics.median(loads)
    print(f"\n2. loading an installed {len(files.wasm) / 1e6:.1f} MB Python guest")
    print(f"   compile (no cache)                     {ms(compile_s)}")
    print(f"   from the cache (verify + map + describe) {ms(load)}   {compile_s / load:8.0f}x faster")
    print(f"   of which deserialize_file alone        {ms(statistics.median(deserialize))}")


async def bench_bytes(home: Path, fetch: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoBody)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    home.mkdir(parents=True, exist_ok=True)
    caps = home / "fetch.capabilities.json"
    caps.write_text(json.dumps({"http": {"allowlist": [{"host": "127.0.0.1", "methods": ["POST"]}],
                                         "max_request_bytes": 4 * BODY_BYTES,
                                         "max_response_bytes": 4 * BODY_BYTES}}))  # fmt: skip
    runtime = WasmRuntime(home, WasmLimits(allow_loopback_http=True), cache_dir=CACHE / "compiled")
    await runtime.start()
    await runtime.install(fetch, caps, name="fetch")
    spec = runtime.tools()[0]
    args = {"url": f"http://127.0.0.1:{port}/echo", "method": "POST", "body_bytes": BODY_BYTES}

    async def once() -> float:
        t0 = time.perf_counter()
        out = await runtime.invoke(spec, args, host("fetch"))
        elapsed = time.perf_counter() - t0
        assert not out.is_error and out.value["length"] == BODY_BYTES, out.value
        return elapsed

    timings = {}
    for label, fast, runs in (
        ("element by element (wasmtime-py)", False, SLOW_RUNS),
        ("bulk (fast path)", True, FAST_RUNS),
    ):
        abi.set_fast_bytes(fast)
        await once()
        timings[label] = statistics.median([await once() for _ in range(runs)])
    abi.set_fast_bytes(True)
    await runtime.aclose()
    server.shutdown()
    slow, fast = timings.values()
    print("\n3. 1 MB body round trip: guest -> host (request body) -> echo server -> guest (response body)")
    for label, value in timings.items():
        print(f"   {label:34} {ms(value)} per execute")
    print(f"   speed-up (target >= 18x)           {slow / fast:8.1f}x")
    bench_conversion(runtime, fetch)
    bench_floor()


# A component that hands n bytes of its memory to the host function ``echo`` and takes the
# answer back: the smallest possible list<u8> round trip, to show what wasmtime itself costs.
FLOOR_WAT = """
(component
  (import "host" (instance $h (export "echo" (func (param "b" (list u8)) (result (list u8))))))
  (core module $memory
    (memory (export "mem") 64)
    (global $bump (mut i32) (i32.const 2000000))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (global.get $bump))
      (global.set $bump (i32.add (global.get $bump) (local.get 3)))
      (local.get $p)))
  (core instance $m (instantiate $memory))
  (alias core export $m "mem" (core memory $mem))
  (alias core export $m "realloc" (core func $realloc))
  (core func $echo (canon lower (func $h "echo") (memory $mem) (realloc $realloc)))
  (core module $main
    (import "m" "mem" (memory 1))
    (import "h" "echo" (func $echo (param i32 i32 i32)))
    (func (export "run") (param $n i32) (result i32)
      (call $echo (i32.const 0) (local.get $n) (i32.const 1999992))
      (i32.load (i32.const 1999996))))
  (core instance $i (instantiate $main (with "m" (instance (export "mem" (memory $mem))))
                                       (with "h" (instance (export "echo" (func $echo))))))
  (func $run (param "n" u32) (result u32) (canon lift (core func $i "run")))
  (export "run" (func $run))
)
"""


def bench_floor() -> None:
    from pincer.runtimes.wasm.engine import new_engine

    engine = new_engine()
    component = wasmtime.component.Component(engine, FLOOR_WAT)
    linker = wasmtime.component.Linker(engine)
    with linker.root() as root, root.add_instance("host") as host_instance:
        abi.add_host_func(host_instance, "echo", lambda body: body)

    def once() -> float:
        store = wasmtime.Store(engine)
        store.set_fuel(10**12)
        store.set_epoch_deadline(10**9)
        run = linker.instantiate(store, component).get_func(store, "run")
        t0 = time.perf_counter()
        assert run(store, BODY_BYTES) == BODY_BYTES
        return time.perf_counter() - t0

    timings = {}
    for fast, runs in ((False, SLOW_RUNS), (True, FAST_RUNS)):
        abi.set_fast_bytes(fast)
        timings[fast] = statistics.median([once() for _ in range(runs)])
    abi.set_fast_bytes(True)
    print(
        f"   the floor, an identity host call on a hand-written component: element by element "
        f"{ms(timings[False])}, bulk {ms(timings[True])} ({timings[False] / timings[True]:.1f}x);"
    )
    print("   what bulk leaves is wasmtime's own per-element conversion (Rust Val lists) plus the copy")


def bench_conversion(runtime: WasmRuntime, fetch: Path) -> None:
    """The host-side conversion alone: lower then lift 1 MB through the value array."""
    engine = runtime._host.engine
    component, _ = CompileCache(CACHE / "compiled", engine).load(fetch.read_bytes())
    http_type = component.type.imports(engine)["near:agent/host@0.3.0"].ty.exports(engine)["http-request"].ty
    list_type = dict(http_type.params)["body"].payload
    data = bytes(range(256)) * (BODY_BYTES // 256)
    store = wasmtime.Store(engine)

    def round_trip(fast: bool) -> float:
        value = ffi.wasmtime_component_val_t()
        t0 = time.perf_counter()
        if fast:
            abi.lower_bytes(data, ctypes.pointer(value))
            out = abi.lift_bytes(value)
        else:
            list_type.convert_to_c(store, data, ctypes.pointer(value))
            out = list_type.convert_from_c(value)
        elapsed = time.perf_counter() - t0
        assert out == data
        return elapsed

    slow = statistics.median([round_trip(False) for _ in range(SLOW_RUNS)])
    fast = statistics.median([round_trip(True) for _ in range(FAST_RUNS)])
    print(f"   conversion alone, lower + lift 1 MB: element by element {ms(slow)}, bulk {ms(fast)}"
          f" ({slow / fast:.0f}x)")  # fmt: skip


async def bench_throughput(home: Path, spin: Path) -> None:
    print(f"\n4. throughput: {THROUGHPUT_CALLS} concurrent calls of spin(n={THROUGHPUT_N})")
    base = None
    for workers in (1, 2):
        runtime = WasmRuntime(home, WasmLimits(workers=workers), cache_dir=CACHE / "compiled")
        await runtime.start()
        await runtime.install(spin, name="spin")
        spec = runtime.get("spin").spec
        await runtime.invoke(spec, {"n": 10}, host("spin"))
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(THROUGHPUT_CALLS):
                tg.start_soon(runtime.invoke, spec, {"n": THROUGHPUT_N}, host("spin"))
        rate = THROUGHPUT_CALLS / (time.perf_counter() - t0)
        await runtime.aclose()
        base = base or rate
        print(
            f"   {workers} worker thread{'s' if workers > 1 else ' '}                   {rate:9.1f} calls/s   {rate / base:6.2f}x"
        )


async def main() -> None:
    components = CACHE / "components"
    print("building or finding the example components ...", flush=True)
    echo, fetch, spin = (cached_build(EXAMPLES / f"{n}.py", components) for n in ("echo", "fetch", "spin"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        await bench_e2e(home / "e2e", echo)
        bench_load(home / "load", echo)
        await bench_bytes(home / "bytes", fetch)
        await bench_throughput(home / "throughput", spin)


if __name__ == "__main__":
    anyio.run(main)
