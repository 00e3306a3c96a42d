"""The ``pincer`` command. Each command group lives in its own module, imported only when it runs.

``COMMANDS`` names every top-level command with its module and its one-line help, so
``pincer --help`` and shell completion list them all without importing any of them; running
``pincer tools list`` imports :mod:`pincer.cli.tools` and nothing of ``mcp`` or ``wasm``.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from pincer import __version__

__all__ = ["COMMANDS", "LazyGroup", "app", "main"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LazyCommand:
    """A top-level command: where it lives (a ``typer.Typer`` or a function) and its help line."""

    module: str
    attribute: str
    help: str


# The order is the order `pincer --help` lists them in: the everyday commands first.
COMMANDS: dict[str, LazyCommand] = {
    "init": LazyCommand(module="pincer.cli.setup", attribute="init", help="Write a commented config.toml with every default."),
    "doctor": LazyCommand(module="pincer.cli.doctor", attribute="doctor", help="Check this installation; every problem comes with its fix."),
    "demo": LazyCommand(module="pincer.cli.demo", attribute="demo", help="Tour pincer in a throwaway home: tools, governed calls, an approval, a denial, the audit trail."),
    "tools": LazyCommand(module="pincer.cli.tools", attribute="app", help="List, inspect and call tools."),
    "secrets": LazyCommand(module="pincer.cli.secrets", attribute="app", help="Manage the encrypted secret store."),
    "auth": LazyCommand(module="pincer.cli.auth", attribute="app", help="Set up, show and revoke the tokens of the built-in tools."),
    "approvals": LazyCommand(module="pincer.cli.approvals", attribute="app", help="List and answer approval requests."),
    "tasks": LazyCommand(module="pincer.cli.tasks", attribute="app", help="List, show and cancel tasks (calls that outlive their connection)."),
    "audit": LazyCommand(module="pincer.cli.audit", attribute="app", help="Read and verify the audit log."),
    "people": LazyCommand(module="pincer.cli.people", attribute="app", help="Manage people, their roles and their personal access tokens."),
    "policy": LazyCommand(module="pincer.cli.policy", attribute="app", help="Show the policy in force."),
    "config": LazyCommand(module="pincer.cli.setup", attribute="config_app", help="Check, locate and show the settings files."),
    "sandbox": LazyCommand(module="pincer.cli.sandbox", attribute="app", help="Inspect the sandbox that script tools run in."),
    "mcp": LazyCommand(module="pincer.cli.mcp", attribute="app", help="Connect external MCP servers as governed tools."),
    "openapi": LazyCommand(module="pincer.cli.openapi", attribute="app", help="Turn OpenAPI services into tools."),
    "run": LazyCommand(module="pincer.cli.run", attribute="run_command", help="Run a skill, or a prompt (--message), with the agent loop: the model's text streams to stdout, each tool call is one line on stderr."),
    "chat": LazyCommand(module="pincer.cli.run", attribute="chat", help="Talk with the agent loop: each line is a message; /NAME runs a skill's command; /skills, /tools, /exit."),
    "runs": LazyCommand(module="pincer.cli.runs", attribute="app", help="List, show and cancel agent runs."),
    "skills": LazyCommand(module="pincer.cli.skills", attribute="app", help="Skills: list, show, check, render, select; dependencies; skills from MCP servers."),
    "wasm": LazyCommand(module="pincer.cli.wasm", attribute="app", help="Build, install and remove WASM tools (near:agent@0.3.0 components)."),
    "search": LazyCommand(module="pincer.cli.artifacts", attribute="search", help="Search every hub source: IronClaw registries, hub servers, server.json documents."),
    "install": LazyCommand(module="pincer.cli.artifacts", attribute="install", help="Install an artifact (tool, skill, MCP server, OpenAPI service, script, bundle), or a workspace pincer.lock."),
    "update": LazyCommand(module="pincer.cli.artifacts", attribute="update", help="Update installed artifacts to the newest version their source has; the previous one is kept."),
    "outdated": LazyCommand(module="pincer.cli.artifacts", attribute="outdated", help="List installed artifacts whose source has a newer version."),
    "remove": LazyCommand(module="pincer.cli.artifacts", attribute="remove", help="Remove an installed artifact; a running pincer serve drops it within a second."),
    "rollback": LazyCommand(module="pincer.cli.artifacts", attribute="rollback", help="Go back to the version installed before the current one (kept for this)."),
    "pin": LazyCommand(module="pincer.cli.artifacts", attribute="pin", help="Keep an artifact at its version: update leaves it alone until unpin."),
    "unpin": LazyCommand(module="pincer.cli.artifacts", attribute="unpin", help="Let update change a pinned artifact again."),
    "installed": LazyCommand(module="pincer.cli.artifacts", attribute="installed", help="List what the hub installed here (pincer.lock), each with its state on disk."),
    "verify": LazyCommand(module="pincer.cli.artifacts", attribute="verify", help="Check installed artifacts against pincer.lock: exit 1 naming each one edited, replaced or gone."),
    "scan": LazyCommand(module="pincer.cli.artifacts", attribute="scan", help="Run the install-time scanner on a file or folder; exit 1 when a finding is high severity."),
    "hub": LazyCommand(module="pincer.cli.hub", attribute="app", help="Run a hub server, publish to one, and manage trusted signing keys."),
    "cron": LazyCommand(module="pincer.cli.cron", attribute="app", help="Scheduled jobs: add, list, remove, run now, pause, resume, import OpenClaw's."),
    "hooks": LazyCommand(module="pincer.cli.hooks", attribute="app", help="Webhooks: list them, send a signed test delivery to the running gateway."),
    "triggers": LazyCommand(module="pincer.cli.triggers", attribute="app", help="Show every trigger of every skill, job and webhook, with its state."),
    "build": LazyCommand(module="pincer.cli.build", attribute="build", help="Describe a tool; pincer plans, writes, tests (in WASM), signs and registers it."),
    "builds": LazyCommand(module="pincer.cli.build", attribute="builds_app", help="List and show recorded builds: stages, failures, diffs between iterations."),
    "serve": LazyCommand(module="pincer.cli.serve", attribute="serve", help="Serve every tool over MCP (streamable HTTP at /mcp) and REST (/api/v1) until interrupted."),
    "token": LazyCommand(module="pincer.cli.serve", attribute="token_app", help="Print the gateway's bearer token, or make one for another session."),
    "db": LazyCommand(module="pincer.cli.db", attribute="app", help="Upgrade and inspect the shared PostgreSQL store ([store] url)."),
    "completion": LazyCommand(module="pincer.cli.completion", attribute="completion", help="Print the shell completion script for bash, zsh or fish."),
}  # fmt: skip


class LazyGroup(TyperGroup):
    """The root group: lists ``COMMANDS`` from the table and builds one only when it is asked for.

    ``get_command`` returns the real command (importing its module); listing for ``--help`` and
    completing top-level names read the table alone.
    """

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = self._load(cmd_name, COMMANDS[cmd_name])
        return self.commands.get(cmd_name)

    def _load(self, name: str, entry: LazyCommand) -> _click.Command:
        target = getattr(importlib.import_module(entry.module), entry.attribute)
        if isinstance(target, typer.Typer):
            return get_group_from_info(
                TyperInfo(target, name=name),
                pretty_exceptions_short=True,
                suggest_commands=self.suggest_commands,
                rich_markup_mode=self.rich_markup_mode,
            )
        return get_command_from_info(
            CommandInfo(name=name, callback=target), pretty_exceptions_short=True, rich_markup_mode=self.rich_markup_mode
        )

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        rows = [(name, entry.help) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: _click.Context, incomplete: str) -> list[Any]:
        from typer._click.shell_completion import CompletionItem

        names = [CompletionItem(name, help=entry.help) for name, entry in COMMANDS.items() if name.startswith(incomplete)]
        # The root's own options (--version, --help) come from the plain Command behaviour.
        return names + _click.core.Command.shell_complete(self, ctx, incomplete)


app = typer.Typer(
    name="pincer",
    cls=LazyGroup,
    help="pincer gives AI agents tools safely: one registry, one capability model, one governed call chain.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Plain help: typer's rich panels print a type column for every flag ("--json <bool>") and
    # read help text as rich markup, which swallows "[gateway]" in "(default: [gateway] host)".
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"pincer {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """pincer: tools for AI agents, governed."""


COMPLETE_VAR = "_PINCER_COMPLETE"


def main() -> None:
    if os.environ.get(COMPLETE_VAR):
        # A shell asking for completions: register typer's shell classes (bash, zsh, fish).
        from typer._completion_classes import completion_init

        completion_init()
        app(prog_name="pincer")
        return
    import sys

    argv = sys.argv[1:]
    if not argv or argv[0].startswith("-") or "--help" in argv:
        app(prog_name="pincer")  # --version and help read nothing of PINCER_HOME
        return
    from pincer.cli.shared_home import synced_home
    from pincer.cli.startup_gc import begin_startup

    begin_startup()  # until the command's Pincer is open (cli/startup_gc.py says why)
    with synced_home(argv):  # the registry's files shared with other machines ([store] url)
        app(prog_name="pincer")

