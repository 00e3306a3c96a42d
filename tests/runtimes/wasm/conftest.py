"""Real components for the WASM tests, built once per run and kept between runs.

Building a Python guest takes 10-30 s and compiling it ~8 s, so both are cached under
``PINCER_WASM_TEST_CACHE`` (the Makefile points it at ``.cache/wasm-test``; the same path is the
default): components by a hash of their inputs (guest source, guest helper, WIT, componentize-py
version), compiled artifacts by pincer's own compile cache key. A fresh clone builds everything
once, with ``pincer wasm build`` in a subprocess, exactly as a user would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pincer.runtimes.wasm.build import build_key

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "wasm"
GUESTS = ("echo", "fetch", "spin", "membomb", "secret_echo")
BUILD_TIMEOUT_S = 300.0
BUILD_WORKERS = 2
PINCER_BIN = Path(sys.executable).parent / "pincer"  # the console script `make setup` installs


def cache_root() -> Path:
    raw = os.environ.get("PINCER_WASM_TEST_CACHE")
    return Path(raw) if raw else REPO / ".cache" / "wasm-test"


def _build(name: str, output: Path) -> Path:
    """``pincer wasm build`` in a subprocess: the CLI path a user takes."""
    proc = subprocess.run(
        [str(PINCER_BIN), "wasm", "build", str(EXAMPLES / f"{name}.py"), "-o", str(output), "--json"],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"building {name} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    assert json.loads(proc.stdout)["ok"] is True
    return output


@pytest.fixture(scope="session")
def wasm_components() -> Mapping[str, Path]:
    """name -> path of the built example component (built now when not cached)."""
    directory = cache_root() / "components"
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / f"{name}-{build_key(EXAMPLES / f'{name}.py')}.wasm" for name in GUESTS}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        with ThreadPoolExecutor(BUILD_WORKERS) as pool:
            list(pool.map(lambda n: _build(n, paths[n]), missing))
    return paths


@pytest.fixture(scope="session")
def wasm_compile_cache() -> Path:
    """A compile cache directory shared by every test (and kept between runs)."""
    path = cache_root() / "compiled"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def private_compile_cache(
    wasm_components: Mapping[str, Path], wasm_compile_cache: Path, tmp_path: Path
) -> Callable[..., Path]:
    """``private_compile_cache("echo", ...)`` -> a cache directory of this test's own holding those
    components' compiled artifacts (compiled into the shared cache first when missing), for tests
    that remove tools and so drop cache entries."""
    from pincer.runtimes.wasm.cache import CompileCache
    from pincer.runtimes.wasm.engine import new_engine

    def make(*names: str) -> Path:
        target = tmp_path / "private-cache"
        target.mkdir(exist_ok=True)
        shared = CompileCache(wasm_compile_cache, new_engine())
        for name in names:
            wasm = wasm_components[name].read_bytes()
            shared.load(wasm, source=name)
            key = shared.key(hashlib.sha256(wasm).hexdigest())
            for suffix in (".cwasm", ".json"):
                shutil.copy(wasm_compile_cache / f"{key}{suffix}", target / f"{key}{suffix}")
        return target

    return make


@pytest.fixture
async def wasm_runtime(
    pincer_home: Path, wasm_components: Mapping[str, Path], wasm_compile_cache: Path, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """``await make(tools={"echo": caps_dict_or_None, ...}, limits=WasmLimits(...))`` -> a started
    WasmRuntime over ``pincer_home`` with those example tools installed; closed afterwards."""
    from pincer.runtimes.wasm.runtime import WasmRuntime

    made: list[Any] = []

    async def make(tools: Mapping[str, Mapping[str, Any] | None], limits: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("cache_dir", wasm_compile_cache)
        runtime = WasmRuntime(pincer_home, limits, **kwargs)
        await runtime.start()
        made.append(runtime)
        for name, caps in tools.items():
            caps_path = None
            if caps is not None:
                caps_path = tmp_path / f"{name}.capabilities.json"
                caps_path.write_text(json.dumps(caps))
            await runtime.install(wasm_components[name], caps_path, name=name)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()
