"""Scripted answers and a Builder over the local model server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pincer.demo.model_server import ScriptedCall, Turn


def plan_turn(name: str, hosts: list[str], *, secrets: list[dict[str, Any]] | None = None,
              effects: list[str] | None = None, schema: dict[str, Any] | None = None) -> Turn:  # fmt: skip
    return Turn(calls=(ScriptedCall(name="submit_plan", arguments={
        "name": name, "description": f"{name}: a tool the tests build",
        "input_schema": schema or {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "output": {"celsius": "number"}, "hosts": hosts, "secrets": secrets or [], "effects": effects or ["network"],
    }),))  # fmt: skip


def code_turn(source: str, tests: list[dict[str, Any]], fixtures: list[dict[str, Any]] | None = None) -> Turn:
    return Turn(calls=(ScriptedCall(name="submit_code", arguments={"source": source, "tests": tests, "fixtures": fixtures or []}),))


def weather_source(host: str, *, plus: int = 0) -> str:
    return f'''
from pincer_guest import Tool, ToolFailed, http_request, tool  # noqa: F401


@tool(description="The temperature in a city now.",
      schema={{"type": "object", "properties": {{"city": {{"type": "string"}}}}, "required": ["city"]}})
def weather(params):
    resp = http_request("GET", "http://{host}/v1/now?city=" + params["city"])
    if resp.status != 200:
        raise ToolFailed("the weather API answered " + str(resp.status))
    return {{"city": params["city"], "celsius": resp.json()["celsius"] + {plus}}}
'''


def make_builder(home: Path, server: Any, secrets: Any, runner_cache: Path, **kwargs: Any) -> Any:
    from pincer.builder.build import Builder
    from pincer.config import ModelSettings
    from pincer.llm.provider import open_provider
    from pincer.runtimes.wasm.limits import WasmLimits

    provider = open_provider(ModelSettings(provider="openai", model="scripted-model", base_url=server.openai_url,
                                           stream=True, max_retries=0), None)  # fmt: skip
    kwargs.setdefault("limits", WasmLimits(fuel=2_000_000_000, timeout_s=5.0, allow_loopback_http=True))
    return Builder(home=home, provider=provider, model="scripted-model", secrets=secrets, runner_cache=runner_cache, **kwargs)


def home_digest(home: Path, *, skip: tuple[str, ...] = ("builds", "secrets.db", "cache", "hub")) -> dict[str, str]:
    """path -> sha256 of every file under ``home`` outside ``skip`` (what a refused build must not touch)."""
    import hashlib

    found = {}
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home)
        if rel.parts and rel.parts[0] in skip:
            continue
        if path.is_file() or path.is_symlink():
            found[str(rel)] = hashlib.sha256(path.read_bytes() if path.is_file() else str(path.readlink()).encode()).hexdigest()
    return found


def not_json_turn() -> Turn:
    return Turn(calls=(ScriptedCall(name="submit_code", arguments='{"source": "from pincer_guest import'),))


KEY = b"k" * 32


@asynccontextmanager
async def open_chain(home: Path, *, allow: tuple[str, ...] = ()) -> AsyncIterator[Any]:
    """A Pincer over ``home`` whose WASM runtime may reach 127.0.0.1 over plain http (the local
    server plays the tool's host), admitting tools through the lockfile check as ``pincer serve`` does."""
    from pincer.config import parse_config
    from pincer.runtimes.wasm import WasmRuntime
    from pincer.runtimes.wasm.limits import WasmLimits
    from pincer.service import Pincer

    grants = "".join(f'[[grants]]\ntool = "{name}"\ndefault = "allow"\n' for name in allow)
    config = parse_config("[approvals]\ntimeout_s = 5\n" + grants, home=home)
    async with Pincer.open(home, config=config, secret_key=KEY, audit_key=KEY, wasm=False, external=False, skills=False) as pincer:
        guard = pincer.integrity
        runtime = WasmRuntime(home, WasmLimits(allow_loopback_http=True), scanner=pincer.scanner,
                              admit=lambda name: guard.refusal("tool", name))  # fmt: skip
        pincer.wasm = runtime
        await pincer.add_runtime(runtime)
        yield pincer
