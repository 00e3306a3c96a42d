"""``pincer wasm``: build Python guests into tool components; install and remove WASM tools.

``install_tool`` and ``remove_tool`` are plain functions so ``pincer tools install/remove`` can
call them; ``pincer wasm install/remove`` expose the same here. Progress (building takes 10-30 s,
compiling seconds) goes to stderr: a transient bar on a terminal, a line per stage otherwise;
``--json`` writes one document to stdout and no progress.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import EXIT_OK, JsonOption, emit_json, fail, pincer_home, stderr
from pincer.cli.progress import Steps
from pincer.core.acts import ActKind
from pincer.core.errors import PincerError

__all__ = ["app", "build", "install_tool", "remove_tool"]

app = typer.Typer(help="Build, install and remove WASM tools (near:agent@0.3.0 components).", no_args_is_help=True)

_STEPS = ("reading", "compiling", "describing", "installing")


@app.command("build")
def build(
    path: Path = typer.Argument(..., help="A guest module (.py) or a directory holding tool.py."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the component (.wasm)."),
    module: str | None = typer.Option(None, "--module", help="Module name inside a directory (default: tool)."),
    as_json: bool = JsonOption,
) -> None:
    """Build a Python guest into a tool component with componentize-py (WASI stubbed out)."""
    from pincer.runtimes.wasm.build import build_component

    started = time.perf_counter()
    try:
        with Steps(enabled=not as_json) as steps:
            steps.stage(f"building {path} with componentize-py (10-30 s)")
            out = build_component(path, output, module=module)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    seconds = time.perf_counter() - started
    data = {"ok": True, "output": str(out), "bytes": out.stat().st_size, "seconds": round(seconds, 2)}
    if as_json:
        emit_json(data)
    else:
        stderr.print(f"built {out} ({data['bytes']:,} bytes in {seconds:.1f} s)")
    raise typer.Exit(EXIT_OK)


def install_tool(source: Path, capabilities: Path | None = None, *, name: str | None = None,
                 as_json: bool = False, home: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Install a ``.wasm`` (+ capabilities) or IronClaw ``.tar.gz`` under PINCER_HOME with a
    progress bar on stderr; returns what was installed. Raises PincerError on failure."""
    from pincer.runtimes.wasm.runtime import WasmHost

    home = home or pincer_home()
    with Steps(total=len(_STEPS), enabled=not as_json) as steps:
        steps.stage(f"reading {source.name}", completed=0)

        def step(message: str) -> None:
            done = _STEPS.index(message) if message in _STEPS else 0
            hint = " (compiling takes a few seconds the first time)" if message == "compiling" else ""
            steps.stage(f"{message} {source.name}{hint}", completed=done)

        result = WasmHost(home).install_sync(source, capabilities, name=name, progress=step)
    record_act(home, ActKind.EXTENSION, subject=result.name, outcome="replaced" if result.replaced else "installed",
               reason=f"WASM tool {result.name} {'replaced' if result.replaced else 'installed'} from {source.name}",
               args={"runtime": "wasm", "sha256": result.digest})  # fmt: skip
    return {
        "ok": True,
        "name": result.name,
        "path": str(result.path),
        "sha256": result.digest,
        "description": result.description,
        "replaced": result.replaced,
    }


def remove_tool(name: str, *, home: Path | None = None) -> dict[str, Any]:
    """Remove an installed WASM tool and its compile cache entry; raises ToolNotFound."""
    from pincer.runtimes.wasm.install import remove

    home = home or pincer_home()
    path = remove(home, name)
    record_act(home, ActKind.EXTENSION, subject=name, outcome="removed", reason=f"WASM tool {name} removed",
               args={"runtime": "wasm"})  # fmt: skip
    return {"ok": True, "name": name, "removed": str(path)}


@app.command("install")
def install_command(
    source: Path = typer.Argument(..., help="TOOL.wasm or an IronClaw-style NAME.tar.gz."),
    capabilities: Path | None = typer.Option(None, "--capabilities", help="The tool's capabilities JSON file."),
    name: str | None = typer.Option(None, "--name", help="Install under this name (default: the file name)."),
    as_json: bool = JsonOption,
) -> None:
    """Install a WASM tool: check, compile, read its schema and description, place it."""
    try:
        data = install_tool(source, capabilities, name=name, as_json=as_json)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json(data)
    else:
        verb = "replaced" if data["replaced"] else "installed"
        stderr.print(f"{verb} [bold]{data['name']}[/]: {data['description']}")
    raise typer.Exit(EXIT_OK)


@app.command("remove")
def remove_command(name: str, as_json: bool = JsonOption) -> None:
    """Remove an installed WASM tool and drop its compile cache entry."""
    try:
        data = remove_tool(name)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json(data)
    else:
        stderr.print(f"removed [bold]{name}[/]")
    raise typer.Exit(EXIT_OK)
