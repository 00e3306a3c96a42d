"""The tool builder: plan-to-registered time with the scripted model, the shared runner next to
the standalone componentize-py path, in the same run.

    .venv/bin/python bench/builder.py

Both paths run the same build (a scripted plan and one passing ``submit_code``, so the model's
time is near zero) into a fresh home each time, with the runner component already in its cache
(it is built once per pincer version, like the test components):

- runner: the tool is its source handed to the shared, precompiled runner (no compile); median
  of 5 builds;
- standalone: ``--standalone``: componentize-py builds a component of the source and wasmtime
  compiles it at install (IronClaw-compatible); 1 build (it takes tens of seconds).

Measured from the plan's acceptance to the tool in ``pincer.lock`` and installed. Target from
issue 16: <= 5 s with the runner, at least 8x faster than standalone.

The runner's one-time cost (componentize-py building it and wasmtime compiling it, once per pincer
version and machine) is left out of the per-build figure, so it is measured too, into an empty
cache of its own, and printed beside it (``--no-cold`` skips it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pincer.builder.build import Builder, BuildRequest  # noqa: E402
from pincer.config import ModelSettings  # noqa: E402
from pincer.demo.model_server import ScriptedCall, Turn, serve_models  # noqa: E402
from pincer.llm.provider import open_provider  # noqa: E402
from pincer.secrets.store import SecretStore  # noqa: E402

RUNNER_BUILDS = 5
SOURCE = '''
from pincer_guest import Tool, tool  # noqa: F401


@tool(description="Shout a word.", schema={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})
def shout(params):
    return {"shout": params["word"].upper() + "!"}
'''
PLAN = {"name": "shout", "description": "Shout a word.", "effects": [],
        "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}  # fmt: skip
CODE = {"source": SOURCE, "tests": [{"args": {"word": "hey"}, "expect": {"shout": "HEY!"}}]}


def _runner_cache() -> Path:
    raw = os.environ.get("PINCER_WASM_TEST_CACHE")
    return (Path(raw) if raw else REPO / ".cache" / "wasm-test") / "runner"


async def one_build(standalone: bool) -> float:
    script = [Turn(calls=(ScriptedCall(name="submit_plan", arguments=PLAN),)),
              Turn(calls=(ScriptedCall(name="submit_code", arguments=CODE),))]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pincer-bench-builder-") as tmp, serve_models(script) as server:
        home = Path(tmp)
        provider = open_provider(ModelSettings(provider="openai", model="scripted-model", base_url=server.openai_url), None)
        try:
            builder = Builder(home=home, provider=provider, model="scripted-model", secrets=SecretStore.open(home, key=b"b" * 32),
                              runner_cache=_runner_cache())  # fmt: skip
            report = await builder.build(BuildRequest(description="shout a word", standalone=standalone))
        finally:
            await provider.aclose()
        assert report.ok and report.plan_to_registered_s is not None
        return report.plan_to_registered_s


async def cold_runner_s() -> float:
    """The runner built and compiled from nothing: an empty cache and an empty home."""
    from pincer.builder.runner import ensure_runner

    with tempfile.TemporaryDirectory(prefix="pincer-bench-runner-") as tmp:
        started = time.perf_counter()
        await anyio.to_thread.run_sync(ensure_runner, Path(tmp) / "runner", Path(tmp) / "home")
        return time.perf_counter() - started


async def main(cold: bool) -> None:
    from pincer.builder.runner import ensure_runner

    once = await cold_runner_s() if cold else None
    await anyio.to_thread.run_sync(ensure_runner, _runner_cache(), _runner_cache().parent / "runner-home")
    await one_build(False)  # warm-up: imports, the home cache link
    runner = [await one_build(False) for _ in range(RUNNER_BUILDS)]
    standalone = await one_build(True)
    median = statistics.median(runner)
    print("builder: plan -> registered, scripted model (model time ~0)")
    print(f"  shared runner     median {median:7.3f} s   (min {min(runner):.3f}, max {max(runner):.3f}; {RUNNER_BUILDS} builds)")
    print(f"  standalone        {standalone:7.3f} s   (componentize-py + compile; 1 build)")
    print(f"  ratio             {standalone / median:7.1f}x   target: runner <= 5 s, >= 8x")
    if once is not None:
        print(f"  runner, once      {once:7.3f} s   (build + compile into an empty cache; once per pincer version, not per build)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-cold", action="store_true", help="skip measuring the runner's one-time build")
    anyio.run(main, not parser.parse_args().no_cold)
