"""The ``pincer`` command. Each command group lives in its own module."""

from __future__ import annotations

import typer

from pincer import __version__
from pincer.cli import approvals, audit, demo, mcp, openapi, policy, sandbox, secrets, serve, skills, tools, wasm

app = typer.Typer(
    name="pincer",
    help="pincer gives AI agents tools safely: one registry, one capability model, one governed call chain.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(tools.app, name="tools")
app.add_typer(secrets.app, name="secrets")
app.add_typer(approvals.app, name="approvals")
app.add_typer(audit.app, name="audit")
app.add_typer(policy.app, name="policy")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(mcp.app, name="mcp")
app.add_typer(openapi.app, name="openapi")
app.add_typer(wasm.app, name="wasm")
app.add_typer(skills.app, name="skills")
app.add_typer(serve.token_app, name="token")
app.command("demo")(demo.demo)
app.command("serve")(serve.serve)


def _version(value: bool) -> None:
    if value:
        print(f"pincer {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """pincer: tools for AI agents, governed."""


def main() -> None:
    app()
