"""A running gateway while the hub changes what is installed (issue 15 item 6, "How it is
checked"): 32 concurrent callers never see a failure other than the tool being gone while a
WASM tool is installed and removed under them; a call in flight on a WASM tool finishes on the
version it started with while an update replaces it; an artifact edited on disk is refused at
start and while serving, and the verified version keeps serving."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pincer.hub.installer import InstallOptions
from pincer.service import Pincer
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.hub.conftest import make_hub, seed_compile_cache

pytestmark = pytest.mark.anyio

CALLERS = 32
CHURN_ROUNDS = 3
VISIBLE_TIMEOUT_S = 60.0  # the state watcher polls every second; a loaded machine is slower
CALL_TIMEOUT_S = 120.0


def _tarball(component: Path, caps: Mapping[str, Any] | None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=1) as tar:
        files = [("worker.wasm", component.read_bytes())]
        if caps is not None:
            files.append(("worker.capabilities.json", json.dumps(caps).encode()))
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _publish_to_folder(registry: Path, version: str, data: bytes) -> None:
    """An IronClaw-layout folder whose tools/worker.json names this version's tarball."""
    (registry / "tools").mkdir(parents=True, exist_ok=True)
    (registry / f"worker-{version}.tar.gz").write_bytes(data)
    entry = {"name": "worker", "kind": "tool", "version": version, "description": "a worker",
             "artifacts": {"wasm32-wasip2": {"url": f"worker-{version}.tar.gz", "sha256": hashlib.sha256(data).hexdigest()}}}  # fmt: skip
    (registry / "tools" / "worker.json").write_text(json.dumps(entry))


async def _tools(live: LiveGateway, client: httpx.AsyncClient) -> dict[str, Any]:
    listed = (await client.get("/api/v1/tools", headers=live.headers)).json()
    items = listed["tools"] if isinstance(listed, dict) else listed
    return {t["name"]: t for t in items}


async def _wait_for(live: LiveGateway, client: httpx.AsyncClient, check: Any, what: str) -> None:
    with anyio.fail_after(VISIBLE_TIMEOUT_S):
        while not check(await _tools(live, client)):
            await anyio.sleep(0.1)


async def _call(live: LiveGateway, client: httpx.AsyncClient, tool: str, args: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await client.post(f"/api/v1/tools/{tool}/call", json={"args": dict(args)}, headers=live.headers, timeout=CALL_TIMEOUT_S)
    return response.status_code, response.json()


@pytest.fixture
def prepared(tmp_path: Path, wasm_components: Mapping[str, Path], wasm_compile_cache: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    seed_compile_cache(home, wasm_compile_cache, wasm_components["echo"], wasm_components["spin"])
    return home, tmp_path / "registry"


async def test_install_and_remove_under_32_concurrent_callers(prepared: tuple[Path, Path], wasm_components: Mapping[str, Path]) -> None:
    home, registry = prepared
    _publish_to_folder(registry, "1.0.0", _tarball(wasm_components["echo"], None))
    hub = make_hub(home, [{"name": "local", "path": str(registry)}])
    outcomes: Counter[str] = Counter()
    failures: list[Any] = []
    async with live_gateway(home) as live, live.http() as client:
        stop = anyio.Event()

        async def caller(index: int) -> None:
            while not stop.is_set():
                tool = "worker" if index % 2 else "say"
                status, body = await _call(live, client, tool, {"message": "hi"} if tool == "worker" else {"text": "hi"})
                if status == 200 and body.get("ok"):
                    outcomes[f"{tool} ok"] += 1
                elif tool == "worker" and status == 404 and body["error"]["code"] == "tool_not_found":
                    outcomes["worker gone"] += 1
                else:
                    failures.append((tool, status, body))

        async with anyio.create_task_group() as tg:
            for index in range(CALLERS):
                tg.start_soon(caller, index)
            for _ in range(CHURN_ROUNDS):
                await anyio.to_thread.run_sync(lambda: hub.install("tools/worker", InstallOptions(allow_unsigned=True)))
                await _wait_for(live, client, lambda tools: "worker" in tools, "worker installed")
                before = outcomes["worker ok"]
                with anyio.fail_after(VISIBLE_TIMEOUT_S):
                    while outcomes["worker ok"] < before + CALLERS:
                        await anyio.sleep(0.05)
                await anyio.to_thread.run_sync(lambda: hub.remove("tools/worker"))
                await _wait_for(live, client, lambda tools: "worker" not in tools, "worker removed")
            stop.set()
    assert not failures, failures[:5]
    assert outcomes["worker ok"] >= CHURN_ROUNDS * CALLERS and outcomes["say ok"] > 0 and outcomes["worker gone"] > 0, outcomes


async def test_a_call_in_flight_finishes_on_the_version_it_started_with(prepared: tuple[Path, Path],
                                                                       wasm_components: Mapping[str, Path]) -> None:  # fmt: skip
    home, registry = prepared
    slow = {"description": "v1: counts", "limits": {"fuel": 10**13, "timeout_s": 100}}
    _publish_to_folder(registry, "1.0.0", _tarball(wasm_components["spin"], slow))
    hub = make_hub(home, [{"name": "local", "path": str(registry)}])
    await anyio.to_thread.run_sync(lambda: hub.install("tools/worker", InstallOptions(allow_unsigned=True)))
    _publish_to_folder(registry, "2.0.0", _tarball(wasm_components["echo"], {"description": "v2: echoes"}))
    config = "[tools]\ntimeout_s = 110\n"
    async with live_gateway(home, config=config) as live, live.http() as client:
        assert (await _tools(live, client))["worker"]["description"].startswith("Count to n")  # spin, v1
        n = 20_000_000
        for _attempt in range(4):  # a machine too slow to update within the call: count longer and try again
            result: dict[str, Any] = {}
            finished_at: list[float] = []

            async def slow_call(n: int = n, result: dict[str, Any] = result, finished_at: list[float] = finished_at) -> None:
                result["answer"] = await _call(live, client, "worker", {"n": n})
                finished_at.append(time.monotonic())

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await anyio.sleep(0.2)
                await anyio.to_thread.run_sync(lambda: hub.update("tools/worker", allow_unsigned=True))
                await _wait_for(live, client, lambda tools: "Return the given params" in tools["worker"]["description"], "v2")
                swapped_at = time.monotonic()
                fresh = await _call(live, client, "worker", {"n": 1, "message": "new"})
            status, body = result["answer"]
            if finished_at[0] < swapped_at:
                await anyio.to_thread.run_sync(lambda: hub.rollback("tools/worker"))
                await _wait_for(live, client, lambda tools: "Return the given params" not in tools["worker"]["description"], "v1")
                n *= 3
                continue
            assert status == 200 and body["ok"] is True, body
            assert body["output"] == {"total": n * (n - 1) // 2}  # spin's answer: the version it started on
            assert fresh[1]["output"] == {"n": 1, "message": "new"}  # echo's: the new version
            return
        pytest.fail("the update never finished while a call was running")


async def test_an_edited_artifact_is_refused_at_start_and_the_verified_version_keeps_serving(
    prepared: tuple[Path, Path], wasm_components: Mapping[str, Path]
) -> None:
    home, registry = prepared
    _publish_to_folder(registry, "1.0.0", _tarball(wasm_components["echo"], {"description": "verified"}))
    hub = make_hub(home, [{"name": "local", "path": str(registry)}])
    hub.install("tools/worker", InstallOptions(allow_unsigned=True))
    caps = (home / "tools" / "wasm" / "worker.wasm").resolve().with_name("worker.capabilities.json")
    async with live_gateway(home) as live, live.http() as client:
        assert "worker" in await _tools(live, client)
        caps.write_text(json.dumps({"description": "edited", "http": {"allowlist": [{"host": "evil.example"}]}}))
        wasm = (home / "tools" / "wasm" / "worker.wasm").resolve()
        wasm.write_bytes(wasm.read_bytes())  # touched: the watcher sees a change and re-checks it
        await anyio.sleep(2.5)  # two watcher rounds
        listed = await _tools(live, client)
        assert "worker" in listed  # the verified version stays loaded...
        assert live.pincer.wasm.load_errors["worker"].startswith("tools/worker@1.0.0 was edited on disk")  # ...the edit is not
        status, body = await _call(live, client, "worker", {"message": "still"})
        assert status == 200 and body["output"] == {"message": "still"}
    async with Pincer.open(home, secret_key=b"k" * 32, builtins=False) as pincer:
        assert "worker" not in [spec.name for spec in pincer.registry.list()]
        assert "edited on disk" in pincer.wasm.load_errors["worker"]
        assert "worker.capabilities.json" in pincer.wasm.load_errors["worker"]
