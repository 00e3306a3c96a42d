"""A running service (as `pincer serve` runs it) picks up tools another process installs with
`pincer tools install`, WASM and script alike, and drops removed ones, without a restart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pincer.core.values import CallRequest
from pincer.runtimes.wasm import install as disk
from pincer.service import Pincer
from tests.processes import SHOUT_MANIFEST

pytestmark = pytest.mark.anyio

CLI_TIMEOUT_S = 120.0
PICKUP_TIMEOUT_S = 30.0
PINCER_BIN = Path(sys.executable).parent / "pincer"
KEY_HEX = "11" * 32



async def tools(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, waited for off the event loop: the gateway's loop runs on
    meanwhile, as a real gateway's does (a stalled loop would hold a write transaction it has begun
    open, and SQLite's write lock with it, for as long as it stalls)."""
    env = {**os.environ, "PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY_HEX}
    argv = [str(PINCER_BIN), "tools", *args]
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run(argv, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S, check=False)
    )


async def wait_for(predicate) -> None:
    with anyio.fail_after(PICKUP_TIMEOUT_S):
        while not predicate():
            await anyio.sleep(0.1)


async def test_tools_installed_by_another_process_are_served_live(wasm_components, private_compile_cache, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(private_compile_cache("echo"), disk.cache_dir(home))
    manifest = tmp_path / "shout.toml"
    manifest.write_text(SHOUT_MANIFEST)
    async with Pincer.open(home, secret_key=bytes.fromhex(KEY_HEX), external=False) as pincer:
        async with anyio.create_task_group() as tg:
            await tg.start(pincer.watch_installed_tools, 0.1)
            assert "wecho" not in pincer.registry and "shout" not in pincer.registry

            done = await tools(home, "install", str(wasm_components["echo"]), "--name", "wecho", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["name"] == "wecho"
            done = await tools(home, "install", str(manifest), "--json")
            assert done.returncode == 0, done.stderr

            await wait_for(lambda: "shout" in pincer.registry)
            # No component was installed at start, so the WASM runtime is added with the first one.
            await wait_for(lambda: "wecho" in pincer.registry or getattr(pincer.wasm, "load_errors", None))
            assert not pincer.wasm.load_errors
            result = await pincer.call(CallRequest(tool="wecho", args={"hello": "wasm"}))
            assert result.ok, result.error
            shouted = await pincer.call(CallRequest(tool="shout", args={"text": "live"}))
            assert shouted.ok and shouted.output["stdout"].strip() == "live"

            assert (await tools(home, "remove", "wecho")).returncode == 0
            assert (await tools(home, "remove", "shout")).returncode == 0
            await wait_for(lambda: "shout" not in pincer.registry)
            await wait_for(lambda: "wecho" not in pincer.registry)
            tg.cancel_scope.cancel()
