"""``pincer serve`` (the gateway over HTTP) and ``pincer token`` (its bearer tokens)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, pincer_home, run, stderr
from pincer.config import GatewaySettings
from pincer.core.errors import ConfigError, PincerError, UsageError

if TYPE_CHECKING:
    from pincer.gateway.mcp_server import McpExtension
    from pincer.service import Pincer

__all__ = ["serve", "token_app", "event_loop_options"]

EXIT_INTERRUPTED = 130
_GATEWAY = GatewaySettings()  # the defaults shown in --help


async def gateway_extensions(pincer: Pincer) -> tuple[McpExtension, ...]:
    """The MCP extensions to install: the skills' prompts, resources and skills extension (they keep
    the handlers of any extension installed before them, as the tests' conformance fixtures are)."""
    extensions: list[McpExtension] = []
    if pincer.skills is not None:
        from pincer.gateway.commands_mcp import CommandPromptsExtension
        from pincer.gateway.skills_mcp import SkillsMcpExtension

        extensions.append(SkillsMcpExtension(pincer.skills))
        # After the skills' prompts: it wraps them, adding one prompt per /command.
        extensions.append(CommandPromptsExtension(pincer.skills))
    return tuple(extensions)


# The extensions `pincer mcp stdio`'s prelude knows the handshake of (a wrapper that replaces
# gateway_extensions, as the conformance fixtures' launcher does, turns the prelude off).
GATEWAY_EXTENSIONS = gateway_extensions


def serve(
    host: str = typer.Option(None, "--host", help=f"Address to listen on (default: [gateway] host, {_GATEWAY.host})."),
    port: int = typer.Option(
        None, "--port", min=0, max=65535, help=f"Port (default: [gateway] port, {_GATEWAY.port}; 0 picks one)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Serve every tool over MCP (streamable HTTP at /mcp) and REST (/api/v1) until interrupted."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    async def body() -> None:
        from pincer.gateway.serve import ServeInfo
        from pincer.gateway.serve import serve as serve_gateway

        async with open_pincer(quiet=as_json) as pincer:
            settings = pincer.config.gateway
            extensions = await gateway_extensions(pincer)

            def ready(info: ServeInfo) -> None:
                _write_serve_file(pincer.home, info)
                if as_json:
                    emit_json(info.to_dict())
                lines = (
                    f"[bold green]pincer serving[/] {len(pincer.registry.list())} tools at {info.url}",
                    f"  MCP (streamable HTTP): {info.mcp_url}",
                    f"  REST API:              {info.api_url}",
                    f"  OpenAPI:               {info.api_url}/openapi.json",
                    "  bearer token:          `pincer token` prints it",
                    f"  token file:            {info.token_file}",
                    "  every request needs 'Authorization: Bearer <token>'; Ctrl-C stops",
                )
                for line in lines:
                    stderr.print(line, soft_wrap=True)

            try:
                await serve_gateway(
                    pincer,
                    settings=settings,
                    host=host or settings.host,
                    port=settings.port if port is None else port,
                    on_ready=ready,
                    extensions=extensions,
                )
            finally:
                _remove_serve_file(pincer.home)

    try:
        run(body, as_json=as_json, backend_options=event_loop_options(), on_sigterm=False)
    except typer.Exit as stop:
        if stop.exit_code != EXIT_INTERRUPTED:
            raise
        # Ctrl-C is how a server is meant to stop: after the graceful shutdown, that is success.
        stderr.print("pincer serve stopped")
        raise typer.Exit(0) from None


def _write_serve_file(home: Path, info: Any) -> None:
    """``serve.json``: where this gateway listens, for `pincer hooks test` (a port 0 is only known now)."""
    import json

    from pincer.store.owners import process_token

    path = home / "serve.json"
    try:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"url": info.url, "process": process_token()}), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write %s: %s", path, exc)


def _remove_serve_file(home: Path) -> None:
    import json

    from pincer.store.owners import process_token

    path = home / "serve.json"
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("process") == process_token():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def event_loop_options() -> dict[str, Any]:
    """uvloop when installed: the gateway's event loop does the HTTP work, and uvloop does it faster."""
    from pincer.core.extras import available

    return {"use_uvloop": True} if available("fast") else {}


token_app = typer.Typer(
    help="Print the gateway's bearer token, or make one for another session.", invoke_without_command=True
)


@token_app.callback()
def token(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """Print the gateway token (created if there is none yet)."""
    if ctx.invoked_subcommand is not None:
        return
    from pincer.gateway.tokens import load_or_create_token

    home = pincer_home()
    token_file = home / "gateway.token"
    existed = token_file.exists()
    try:
        value = load_or_create_token(home)
    except ConfigError as exc:
        from pincer.cli.common import fail

        fail(exc, as_json=as_json)
    served_at = running_gateway_url(home)
    # Which home is easy to get wrong (PINCER_HOME in one shell, not in the other): say it.
    # Plain writes: `pincer token` answers without importing rich.
    sys.stderr.write(f"{'read' if existed else 'created'} {token_file} (home {home})\n")
    if served_at is None:
        sys.stderr.write(
            f"no `pincer serve` runs on this home now: start one (PINCER_HOME={home} pincer serve), "
            "or set PINCER_HOME to the home your gateway uses\n"
        )
    if as_json:
        emit_json({"token": value, "token_file": str(token_file), "home": str(home), "created": not existed,
                   "gateway_url": served_at})  # fmt: skip
    else:
        sys.stdout.write(value + "\n")


def running_gateway_url(home: Path) -> str | None:
    """The URL of the `pincer serve` running on ``home`` (its serve.json, its process alive), else None."""
    import json

    from pincer.store.owners import is_process_alive

    try:
        info = json.loads((home / "serve.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(info, dict) and isinstance(info.get("url"), str) and is_process_alive(str(info.get("process", ""))):
        return str(info["url"])
    return None


@token_app.command("new")
def new(
    session: str = typer.Option(..., "--session", help="Session the new token's calls run under."),
    as_json: bool = JsonOption,
) -> None:
    """Make a token for SESSION, record its sha256 in config.toml, print the token once."""
    from pincer.cli.acts import record_act
    from pincer.cli.common import fail
    from pincer.core.acts import ActKind
    from pincer.gateway.tokens import new_token, token_digest

    home = pincer_home()
    try:
        value = new_token()
        digest = token_digest(value)
        _append_token(home, digest, session)
        # The digest's first 12 hex name the token (config.toml holds it whole); never the token.
        record_act(home, ActKind.TOKEN, subject=session, outcome="created",
                   reason=f"a gateway token for session {session!r} made", args={"sha256_prefix": digest[:12]})  # fmt: skip
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"token": value, "session": session})
    else:
        sys.stdout.write(value + "\n")
        stderr.print(f"token for session {session!r} recorded (by its sha256) in {home / 'config.toml'}")


def _append_token(home: Path, digest: str, session: str) -> None:
    """Append a ``[[gateway.tokens]]`` entry; the file is restored if the result does not parse."""
    from pincer.config import CONFIG_FILENAME, load_config

    if not session or len(session) > 128 or any(c in session for c in '"\\\n\r'):
        raise UsageError(f"invalid session name {session!r}", hint="use letters, digits, '-' and '_'")
    path = home / CONFIG_FILENAME
    before = path.read_text(encoding="utf-8") if path.exists() else None
    entry = f'\n[[gateway.tokens]]\nsha256 = "{digest}"\nsession = "{session}"\n'
    path.write_text((before or "") + entry, encoding="utf-8")
    try:
        load_config(home)
    except ConfigError:
        if before is None:
            path.unlink()
        else:
            path.write_text(before, encoding="utf-8")
        raise
