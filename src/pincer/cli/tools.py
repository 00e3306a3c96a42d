"""``pincer tools``: list, show and call the tools in the registry."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import (
    EXIT_OK,
    JsonOption,
    emit_json,
    exit_code_for,
    open_pincer,
    parse_json_arg,
    pincer_home,
    print_error,
    run,
    stderr,
)
from pincer.core.acts import ActKind
from pincer.core.errors import UsageError
from pincer.core.values import CallRequest
from pincer.policy.visibility import visible_tool, visible_tools

app = typer.Typer(help="List, inspect and call tools.", no_args_is_help=True)


SessionOption = typer.Option("main", "--session", help="Show what this session sees (its session policy applies).")


@app.command("list")
def list_tools(
    session: str = SessionOption,
    capability: str | None = typer.Option(
        None, "--capability", help="Only tools of MCP servers whose entry carries this capability label."
    ),
    as_json: bool = JsonOption,
) -> None:
    """List the tools a session sees: name, description, runtime, effects, input schema."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(quiet=as_json) as pincer:
            policy = pincer.config.session(session)
            return [
                spec.to_dict()
                for spec in visible_tools(policy, pincer.registry.list())
                if capability is None or capability in (spec.annotations.get("capabilities") or ())
            ]

    tools = run(body, as_json=as_json)
    if as_json:
        emit_json(tools)
        return
    from rich.table import Table

    table = Table(title=f"{len(tools)} tools", title_justify="left")
    for column in ("name", "runtime", "effects", "description"):
        table.add_column(column)
    for tool in tools:
        table.add_row(tool["name"], tool["runtime"], ", ".join(tool["effects"]) or "-", tool["description"])
    stderr.print(table)


@app.command("show")
def show_tool(name: str, session: str = SessionOption, as_json: bool = JsonOption) -> None:
    """Show one tool: effects, input and output schema, an MCP tool's annotations as its server sent them."""

    async def body() -> dict[str, Any]:
        async with open_pincer(quiet=as_json) as pincer:
            return visible_tool(pincer.config.session(session), pincer.registry.get, name).to_dict()

    tool = run(body, as_json=as_json)
    if as_json:
        emit_json(tool)
        return
    stderr.print(f"[bold]{tool['name']}[/] ({tool['runtime']}, from {tool['source']})")
    stderr.print(tool["description"])
    stderr.print(f"effects: {', '.join(tool['effects']) or 'none'}")
    stderr.print(f"side effecting: {tool['side_effecting']}")
    annotations = tool["annotations"]
    upstream = annotations.get("mcp")
    if isinstance(upstream, dict):
        # An MCP server's own hints, as it sent them (the effects above are pincer's decision).
        stderr.print(f"MCP annotations (server {annotations.get('server')}, tool {annotations.get('upstream_name')}):")
        stderr.print_json(json.dumps(upstream))
        if annotations.get("mcp_meta"):
            stderr.print("MCP _meta:")
            stderr.print_json(json.dumps(annotations["mcp_meta"]))
    stderr.print("input schema:")
    stderr.print_json(json.dumps(tool["input_schema"]))
    if tool["output_schema"]:
        stderr.print("output schema:")
        stderr.print_json(json.dumps(tool["output_schema"]))


@app.command("call")
def call_tool(
    name: str,
    args: str = typer.Option("{}", "--args", help="Arguments as a JSON object."),
    session: str = typer.Option("main", "--session", help="Session to call under."),
    idempotency_key: str | None = typer.Option(None, "--idempotency-key", help="Replay-safe key (<= 256 chars)."),
    as_json: bool = JsonOption,
) -> None:
    """Call a tool through the whole call chain. Exit 0 on success, 1 on a tool error or denial,
    2 on a usage error."""

    async def body() -> dict[str, Any]:
        async with open_pincer(quiet=as_json, for_tool=name) as pincer:
            request = CallRequest(tool=name, args={}, session=session, idempotency_key=idempotency_key, caller="cli")
            try:
                request = replace(request, args=parse_json_arg(args))
            except UsageError as exc:
                return (await pincer.dispatcher.reject(request, exc)).to_dict()

            async def tell(approval: Any) -> None:
                stderr.print(
                    f"[yellow]waiting for approval {approval.id}[/]: {approval.reason}\n"
                    f"  answer with `pincer approvals approve {approval.id}` (or `deny {approval.id}`)"
                )

            result = await pincer.call(request, on_approval=tell)
            return result.to_dict()

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
    elif result["ok"]:
        output = result["output"]
        print(output if isinstance(output, str) else json.dumps(output, indent=2, ensure_ascii=False))
        if result["cached"]:
            stderr.print("[dim](cached result: the tool did not run again)[/]")
    else:
        error = result["error"]
        print_error(str(error.get("message", "")), error.get("hint"), code=str(error.get("code", "error")))
    raise typer.Exit(EXIT_OK if result["ok"] else exit_code_for(result["error"]))


_WASM_SUFFIXES = (".wasm", ".tar.gz", ".tgz")


@app.command("install")
def install(
    source: Path = typer.Argument(..., help="TOOL.wasm, an IronClaw NAME.tar.gz, or a script tool manifest (.toml/.json)."),
    capabilities: Path | None = typer.Option(None, "--capabilities", help="A WASM tool's capabilities JSON."),
    name: str | None = typer.Option(None, "--name", help="Install a WASM tool under this name."),
    as_json: bool = JsonOption,
) -> None:
    """Install a tool under PINCER_HOME; a running `pincer serve` picks it up without a restart."""

    async def body() -> dict[str, Any]:
        if not source.is_file():  # noqa: ASYNC240 -- one stat in a CLI command
            raise UsageError(f"{source} does not exist or is not a file", hint="give the path of the tool to install")
        if source.name.endswith(_WASM_SUFFIXES):
            from pincer.cli.wasm import install_tool

            return install_tool(source, capabilities, name=name, as_json=as_json, home=pincer_home())
        if capabilities is not None or name is not None:
            raise UsageError(
                "--capabilities and --name apply to WASM tools only", hint="a script manifest names itself"
            )
        from pincer.runtimes.script.installed import install_manifest

        home = pincer_home()
        manifest = install_manifest(home, source)
        record_act(home, ActKind.EXTENSION, subject=manifest.name, outcome="installed",
                   reason=f"script tool {manifest.name} installed from {source.name}", args={"runtime": "script"})  # fmt: skip
        return {"ok": True, "name": manifest.name, "runtime": "script", "description": manifest.description}

    data = run(body, as_json=as_json)
    if as_json:
        emit_json(data)
    else:
        stderr.print(f"installed [bold]{data['name']}[/]: {data.get('description', '')}")


@app.command("remove")
def remove(name: str, as_json: bool = JsonOption) -> None:
    """Remove an installed tool (WASM or script) and its cached artifacts."""

    async def body() -> dict[str, Any]:
        from pincer.runtimes.script.installed import remove_manifest

        home = pincer_home()
        if remove_manifest(home, name):
            record_act(home, ActKind.EXTENSION, subject=name, outcome="removed", reason=f"script tool {name} removed",
                       args={"runtime": "script"})  # fmt: skip
            return {"ok": True, "name": name, "runtime": "script"}
        from pincer.cli.wasm import remove_tool

        return remove_tool(name, home=pincer_home())

    data = run(body, as_json=as_json)
    if as_json:
        emit_json(data)
    else:
        stderr.print(f"removed [bold]{name}[/]")
