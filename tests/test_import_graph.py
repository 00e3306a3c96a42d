"""The import graph: what a light entry point must not pull in, and the direction of
imports docs/architecture.md describes (core and policy import nothing with I/O; nothing below the gateway imports it)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "pincer"


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_gateway_tokens_do_not_import_the_mcp_sdk_or_the_web_stack() -> None:
    loaded = _modules_after("import pincer.gateway.tokens")
    heavy = {m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types", "starlette", "fastapi", "uvicorn"}}
    assert not heavy, sorted(heavy)[:10]


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


# Inner layers and the layers they may not import (docs/architecture.md: imports point inward).
_FORBIDDEN = {
    "core": ("pincer.policy", "pincer.store", "pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "policy": ("pincer.store", "pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "safety": ("pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "store": ("pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "runtimes": ("pincer.gateway", "pincer.cli"),
}


@pytest.mark.parametrize("layer", sorted(_FORBIDDEN))
def test_imports_point_inward(layer: str) -> None:
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for module in _imports_of(path):
            if module.startswith(_FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, bad


# The floors of docs/architecture.md, lowest first (issue 22 item 3): a module imports only from its own floor or
# below, lazy imports inside functions included. Every top-level module and package of src/pincer
# has a floor here, so a new one must be placed.
FLOORS: dict[str, int] = {
    "core": 0,
    "policy": 1, "safety": 1, "store": 1, "secrets": 1, "config": 1, "config_template": 1, "schedule": 1,
    "telemetry": 1,
    "runtimes": 2,
    "dispatch": 3, "approver": 3, "registry": 3, "elicitation": 3, "config_check": 3,
    "skills": 4, "llm": 4,
    "triggers": 5, "hub": 5, "builder": 5, "builtins": 5, "demo": 5, "canvas": 5,
    "service": 6, "reload": 6,  # the composition root: one Pincer of every part above
    "gateway": 7, "cli": 7,
    "__init__": 8,  # the public face: names of every floor, imported on first use (__init__.pyi)
}  # fmt: skip


def _top(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def test_every_module_has_a_floor() -> None:
    tops = {_top(p) for p in SRC.rglob("*.py")}
    assert not tops - set(FLOORS), f"give these a floor in FLOORS: {sorted(tops - set(FLOORS))}"


def test_imports_follow_the_floors() -> None:
    """Failed before: config.py imported the triggers package (the cron parser, now
    pincer/schedule.py) and llm/delegate.py the gateway (the approval question, now
    pincer/elicitation.py)."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        floor = FLOORS[_top(path)]
        for module in _imports_of(path):
            parts = module.split(".")
            if parts[0] == "pincer" and len(parts) > 1 and FLOORS.get(parts[1], -1) > floor:
                bad.append(f"{path.relative_to(SRC)} (floor {floor}) imports {module} (floor {FLOORS[parts[1]]})")
    assert not bad, bad


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_graph() -> dict[str, set[str]]:
    """Module -> the pincer modules it imports (lazy ones too; ``from pkg import mod`` is ``pkg.mod``)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*kept, base] if base else kept)
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def test_no_file_level_import_circles() -> None:
    """Failed before with five: cli common/progress, llm provider/openai/anthropic, wasm
    install/runtime, secrets access/store, triggers engine/scheduler (each closed by a lazy or a
    TYPE_CHECKING import)."""
    graph = _file_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, circles


# Issue 11 item 3: a CLI that answers at once. These commands must not load the MCP SDK, wasmtime,
# the web stack or jsonschema (each costs 50-600 ms to import); the command that needs one loads it.
# Issue 13: the model SDKs load only when a run opens a provider.
HEAVY = ("mcp", "mcp_types", "wasmtime", "fastapi", "starlette", "uvicorn", "jsonschema", "openai", "anthropic")


def _modules_after_cli(home: Path, *argv: str) -> set[str]:
    """Run the CLI's ``main()`` with ``argv`` in a fresh interpreter; the modules it loaded."""
    listing = home / "modules.txt"
    code = (
        "import sys\n"
        f"sys.argv = ['pincer', *{list(argv)!r}]\n"
        "from pincer.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"open({str(listing)!r}, 'w').write('\\n'.join(sorted(sys.modules)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home / "pincer-home")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(listing.read_text().split())


@pytest.mark.parametrize(
    "argv",
    [("--version",), ("--help",), ("token",), ("tools", "list"), ("tools", "list", "--json"), ("completion", "bash")],
    ids=" ".join,
)
def test_light_commands_import_no_heavy_dependency(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """Failed on main before the lazy command groups: `pincer --version` imported every command
    module, `mcp` and `wasmtime` among them (0.42 s), and `tools list` the MCP SDK (1.3 s)."""
    loaded = _modules_after_cli(tmp_path, *argv)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert not heavy, heavy[:10]


def test_tools_list_imports_no_template_engine_and_no_page_extractor(tmp_path: Path) -> None:
    """Issue 23 item 1: failed before the skills package loaded its names on first use —
    `pincer tools list --json` imported jinja2 (the skill renderer, ~25 ms) to list tools that
    render nothing. The page extractor and FastMCP are not needed to list tools either."""
    loaded = _modules_after_cli(tmp_path, "tools", "list", "--json")
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("jinja2", "trafilatura", "fastmcp"))
    assert not heavy, heavy[:10]
    assert "pincer.skills.library" in loaded  # the skills are still listed: the library loads


def test_tools_list_with_a_model_configured_imports_no_model_sdk(tmp_path: Path) -> None:
    """With [llm] set, run_skill is registered: still without importing openai or anthropic."""
    home = tmp_path / "pincer-home"
    home.mkdir()
    (home / "config.toml").write_text('[llm]\nmodel = "gpt-4o-mini"\n[llm.profiles.c]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-5"\n')
    loaded = _modules_after_cli(tmp_path, "tools", "list", "--json")
    assert "pincer.llm.delegate" in loaded
    sdks = sorted(m for m in loaded if m.split(".")[0] in ("openai", "anthropic"))
    assert not sdks, sdks[:10]


def test_version_imports_no_command_module(tmp_path: Path) -> None:
    loaded = _modules_after_cli(tmp_path, "--version")
    commands = sorted(m for m in loaded if m.startswith("pincer.") and m != "pincer.cli.main" and m != "pincer.cli")
    assert not commands, commands


def test_tools_list_still_loads_the_mcp_runtime_when_a_server_is_configured(tmp_path: Path) -> None:
    """The lazy path must not hide configured servers: then the SDK loads, and that is fine."""
    from pincer.runtimes.mcp import ServerConfig, ServerStore

    home = tmp_path / "pincer-home"
    home.mkdir()
    ServerStore(home).add(ServerConfig(name="t", transport="stdio", command=sys.executable, args=("-c", "pass")))
    loaded = _modules_after_cli(tmp_path, "tools", "list", "--json")
    assert "pincer.runtimes.mcp.runtime" in loaded


@pytest.mark.parametrize("argv", [("--version",), ("tools", "list", "--json"), ("token", "--json")], ids=" ".join)
def test_json_answers_import_no_rich_and_no_http_stack(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """A command that prints one JSON document needs neither rich (stderr's console is made on
    first use) nor the HTTP client (the http tool imports it when it makes a request)."""
    loaded = _modules_after_cli(tmp_path, *argv)
    heavy = ("rich", "httpcore", "httpcore2", "httpx", "httpx2", "h11", "tarfile")
    # Listing tools lists the skill tools too, and a SKILL.md's frontmatter is YAML (the bundled
    # skills are always there); the other two answer without reading any.
    heavy += () if argv[0] == "tools" else ("yaml",)
    extra = sorted(m for m in loaded if m.split(".")[0] in heavy)
    assert not extra, extra[:10]


def _public_names(package: Path) -> set[str]:
    """The names in a package's ``__all__`` (read from its ``__init__.py``, not imported)."""
    for node in ast.parse((package / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {str(ast.literal_eval(item)) for item in node.value.elts}  # type: ignore[attr-defined]
    return set()


def test_builder_and_hub_use_only_the_runtimes_public_surface() -> None:
    """Issue 22 item 1: the builder and the hub reach a runtime only through its package's
    ``__all__`` (for WASM: read a tool's files, build, compile ahead, the runner sandbox), never
    its modules. Failed before with 33 imports, among them the test bench's wiring of
    ``wasm.component``, ``wasm.host``, ``wasm.http`` and ``wasm.runtime`` and the hub's
    ``wasm.cache``, ``mcp.config`` and ``openapi.document``."""
    runtimes = SRC / "runtimes"
    public = {p.name: _public_names(p) for p in runtimes.iterdir() if (p / "__init__.py").is_file()}
    bad: set[str] = set()
    for path in sorted([*(SRC / "builder").rglob("*.py"), *(SRC / "hub").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [(node.module, alias.name) for alias in node.names]
            else:
                continue
            for module, name in targets:
                parts = module.split(".")
                if parts[:2] != ["pincer", "runtimes"]:
                    continue
                where = f"{path.relative_to(SRC)}:{node.lineno}"
                if len(parts) != 3 or parts[2] not in public:
                    bad.add(f"{where} imports {module} (use the runtime package's public names)")
                elif name is None or name not in public[parts[2]]:
                    bad.add(f"{where} imports {name!r} from {module}, not in its __all__")
    assert not bad, sorted(bad)


# Where the gateway is assembled of an open Pincer (docs/architecture.md, "Who receives what"); every
# other part of it receives the few services it uses.
_GATEWAY_ASSEMBLY = {"gateway/app.py", "gateway/serve.py", "gateway/stdio.py", "gateway/services.py"}
_PROBES = {"getattr", "hasattr", "setattr", "delattr"}


def test_only_the_gateways_assembly_names_the_service(src: Path = SRC) -> None:
    """Issue 40 item 2. Failed before with 15 modules: canvas_live.py, hooks.py, probes.py, six of
    rest/ and six of ui/ (gateway/tasks.py held the Pincer as ``Any``, mcp_server.py as ``Pincerish``)."""
    bad = []
    for path in sorted((src / "gateway").rglob("*.py")):
        name = path.relative_to(src).as_posix()
        if name not in _GATEWAY_ASSEMBLY and "pincer.service" in _imports_of(path):
            bad.append(name)
    assert not bad, bad


def test_nothing_probes_or_writes_into_the_service(src: Path = SRC) -> None:
    """Issue 40 item 2: no getattr/hasattr/setattr on an object named ``pincer`` and no
    assignment to one of its attributes, outside service.py. Failed before with
    ``getattr(self.pincer, "tasks", None)`` (mcp_server.py), ``getattr(self.gateway.pincer, "mcp",
    None)`` twice (upstream_mcp.py), ``getattr(pincer, "restart_needed", ())`` (probes.py,
    ui/overview.py), ``getattr(pincer, "skills", None)`` (cli/serve.py) and ``pincer.bound = ...``
    (gateway/serve.py)."""

    def names_the_service(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "pincer") or (
            isinstance(node, ast.Attribute) and node.attr in ("pincer", "_pincer")
        )

    bad = []
    for path in sorted(src.rglob("*.py")):
        if path.relative_to(src).as_posix() == "service.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(src)}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _PROBES
                and node.args and names_the_service(node.args[0])
            ):  # fmt: skip
                bad.append(f"{where} {node.func.id}(pincer, ...)")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and names_the_service(target.value):
                        bad.append(f"{where} writes pincer.{target.attr}")
    assert not bad, bad
