"""Install and remove: .wasm (+ capabilities) and IronClaw .tar.gz, live registration, the CLI,
and bad input that leaves nothing behind."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.effects import EffectKind
from pincer.core.errors import ManifestError, RuntimeUnavailable, ToolError, ToolNotFound, UsageError
from pincer.registry import Registry
from pincer.runtimes.wasm import install as disk
from pincer.runtimes.wasm.limits import MIB, parse_tool_limits

pytestmark = pytest.mark.anyio

CLI_TIMEOUT_S = 120.0
PINCER_BIN = Path(sys.executable).parent / "pincer"


def tools_files(home: Path) -> list[str]:
    directory = disk.tools_dir(home)
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def make_bundle(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:  # level 9 takes seconds for 18 MB
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


async def test_install_registers_live_and_remove_unregisters(
    wasm_runtime, wasm_components, pincer_home, tmp_path, private_compile_cache
):
    runtime = await wasm_runtime({}, cache_dir=private_compile_cache("echo"))
    registry = Registry()
    registry.add_runtime(runtime)
    events = []
    registry.subscribe(events.append)
    runtime.subscribe(lambda: registry.refresh(runtime))

    caps = tmp_path / "echo.capabilities.json"
    caps.write_text(json.dumps({"description": "ignored: the export wins", "workspace": {"allowed_prefixes": ["a/"]}}))
    result = await runtime.install(wasm_components["echo"], caps, name="echo")
    assert result.name == "echo" and not result.replaced
    assert tools_files(pincer_home) == ["echo.capabilities.json", "echo.wasm"]
    spec = registry.get("echo")
    assert spec.effects == frozenset({EffectKind.READ_FILESYSTEM})
    assert spec.description == "Return the given params unchanged."
    assert events[-1].added == ("echo",)

    entry = runtime.cache.entry_path(result.digest)
    assert entry.exists()
    await runtime.remove("echo")
    assert "echo" not in registry
    assert events[-1].removed == ("echo",)
    assert tools_files(pincer_home) == []
    assert not entry.exists()
    with pytest.raises(ToolNotFound, match="no WASM tool 'echo' is installed"):
        await runtime.remove("echo")


async def test_an_ironclaw_bundle_installs_the_same_way(wasm_runtime, wasm_components, corpus, tmp_path, pincer_home):
    runtime = await wasm_runtime({})
    caps = (corpus / "ironclaw-v0.29.1/tools-src/github/github-tool.capabilities.json").read_bytes()
    bundle = make_bundle(
        tmp_path / "tool-github-0.2.5-wasm32-wasip2.tar.gz",
        {"github-tool.wasm": wasm_components["fetch"].read_bytes(), "github-tool.capabilities.json": caps},
    )
    result = await runtime.install(bundle)
    assert result.name == "github"
    (spec,) = runtime.tools()
    assert spec.effects == frozenset({EffectKind.NETWORK, EffectKind.USE_SECRET})
    assert spec.side_effecting  # POST, PUT and DELETE are allowed
    assert spec.capabilities.http.allowlist[0].host == "api.github.com"
    assert tools_files(pincer_home) == ["github.capabilities.json", "github.wasm"]


async def test_reinstall_replaces_and_a_new_runtime_loads_what_is_installed(
    wasm_runtime, wasm_components, pincer_home, wasm_compile_cache
):
    from pincer.runtimes.wasm.runtime import WasmRuntime

    runtime = await wasm_runtime({"echo": None})
    again = await runtime.install(wasm_components["echo"], name="echo")
    assert again.replaced
    other = WasmRuntime(pincer_home, cache_dir=wasm_compile_cache)
    await other.start()
    try:
        assert [s.name for s in other.tools()] == ["echo"]
        (pincer_home / "tools" / "wasm" / "echo.wasm").unlink()
        shutil.copy(wasm_components["spin"], pincer_home / "tools" / "wasm" / "spin.wasm")
        added, removed = await other.rescan()
        assert (added, removed) == (["spin"], ["echo"])
    finally:
        await other.aclose()


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("not_a_component", RuntimeUnavailable, "not a valid WebAssembly component"),
        ("bad_name", UsageError, "is not a valid tool name"),
        ("bad_json", ManifestError, "not valid JSON"),
        ("future_wit", ManifestError, "near:agent@0.4.0 but this host implements near:agent@0.3.0"),
        ("bad_limits", ManifestError, "limits.memory_mb"),
        ("too_little_memory", ToolError, "memory limit of 4 MiB"),
        ("two_wasm_bundle", UsageError, "holds 2 .wasm files"),
        ("not_gzip", UsageError, "not a readable .tar.gz"),
        ("wrong_suffix", UsageError, "neither a .wasm file nor a .tar.gz"),
        ("missing", UsageError, "does not exist"),
    ],
)
async def test_bad_input_is_refused_and_leaves_nothing(
    wasm_runtime, wasm_components, pincer_home, tmp_path, case, error, message
):
    runtime = await wasm_runtime({})
    echo = wasm_components["echo"].read_bytes()
    caps = None
    source = tmp_path / "tool.wasm"
    source.write_bytes(echo)
    if case == "not_a_component":
        source.write_bytes(b"\x00asm\x01\x00\x00\x00")
    elif case == "bad_name":
        source = tmp_path / "Bad Name.wasm"
        source.write_bytes(echo)
    elif case in ("bad_json", "future_wit", "bad_limits", "too_little_memory"):
        caps = tmp_path / "caps.json"
        caps.write_text(
            {
                "bad_json": "{nope",
                "future_wit": json.dumps({"wit_version": "0.4.0"}),
                "bad_limits": json.dumps({"limits": {"memory_mb": "lots"}}),
                "too_little_memory": json.dumps({"limits": {"memory_mb": 4}}),
            }[case]
        )
    elif case == "two_wasm_bundle":
        source = make_bundle(tmp_path / "x.tar.gz", {"a.wasm": echo, "b.wasm": echo})
    elif case == "not_gzip":
        source = tmp_path / "x.tar.gz"
        source.write_bytes(b"plain text")
    elif case == "wrong_suffix":
        source = tmp_path / "tool.zip"
        source.write_bytes(echo)
    elif case == "missing":
        source = tmp_path / "nothing.wasm"
    events = []
    runtime.subscribe(lambda: events.append(1))
    with pytest.raises(error) as caught:
        await runtime.install(source, caps)
    assert message in str(caught.value)
    assert tools_files(pincer_home) == [] and runtime.tools() == () and events == []


async def test_bundle_member_paths_are_never_used_as_paths(wasm_runtime, wasm_components, pincer_home, tmp_path):
    runtime = await wasm_runtime({})
    bundle = make_bundle(tmp_path / "evil.tar.gz", {"../../../escape.wasm": wasm_components["echo"].read_bytes()})
    result = await runtime.install(bundle)
    assert result.name == "escape"
    assert tools_files(pincer_home) == ["escape.wasm"]
    assert not (tmp_path.parent / "escape.wasm").exists()


@given(st.one_of(st.none(), st.dictionaries(st.sampled_from(["memory_mb", "fuel", "timeout_s", "other"]),
                 st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.booleans(), st.none()))),
       )  # fmt: skip
def test_parse_tool_limits_accepts_or_names_the_key(raw) -> None:
    try:
        limits = parse_tool_limits(raw, source="t.json")
    except ManifestError as exc:
        assert exc.key.startswith("limits")
        return
    if limits is not None:
        for value in (limits.memory_bytes, limits.fuel, limits.timeout_s):
            assert value is None or value > 0


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=2000), gzip_it=st.booleans())
def test_reading_an_arbitrary_bundle_only_raises_usage_errors(tmp_path_factory, data: bytes, gzip_it: bool) -> None:
    path = tmp_path_factory.mktemp("bundle") / "t.tar.gz"
    path.write_bytes(gzip.compress(data) if gzip_it else data)
    try:
        files = disk.read_source(path)
    except UsageError:
        return
    assert disk.validate_name(files.name) == files.name


def test_a_tool_cannot_raise_its_limits_past_the_ceilings() -> None:
    from pincer.runtimes.wasm.limits import WasmLimits

    mine = parse_tool_limits({"memory_mb": 100_000, "fuel": 1e18, "timeout_s": 1e9}, source="t")
    applied = WasmLimits().for_tool(mine)
    assert applied.memory_bytes == 512 * MIB and applied.fuel == 100_000_000_000 and applied.timeout_s == 300.0


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), "wasm", *args], capture_output=True, text=True, env=env,
                          timeout=CLI_TIMEOUT_S, check=False)  # fmt: skip


async def test_cli_install_and_remove(wasm_components, private_compile_cache, tmp_path):
    home = tmp_path / "cli-home"
    shutil.copytree(private_compile_cache("echo"), disk.cache_dir(home))  # the CLI need not compile again
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps({"http": {"allowlist": [{"host": "api.example.com", "methods": ["GET"]}]}}))
    done = _cli(home, "install", str(wasm_components["echo"]), "--name", "echo", "--capabilities", str(caps), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and data["name"] == "echo" and data["description"] == "Return the given params unchanged."
    assert tools_files(home) == ["echo.capabilities.json", "echo.wasm"]

    bad = _cli(home, "install", str(tmp_path / "none.wasm"), "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "usage_error"

    gone = _cli(home, "remove", "echo", "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout)["name"] == "echo"
    assert tools_files(home) == [] and list(disk.cache_dir(home).glob("*.cwasm")) == []
    again = _cli(home, "remove", "echo")
    assert again.returncode == 2 and "no WASM tool 'echo' is installed" in again.stderr


def test_cli_build_refuses_a_bad_source_quickly(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    done = _cli(tmp_path, "build", str(notes), "-o", str(tmp_path / "out.wasm"), "--json")
    assert done.returncode == 2
    assert "is not a Python file" in json.loads(done.stdout)["error"]["message"]
    assert not (tmp_path / "out.wasm").exists()
