"""What every command shares: PINCER_HOME, the secret key, exit codes, output on the right stream.

Exit codes: 0 success, 1 failure (a tool error, a denial), 2 usage error. With ``--json`` a
command writes exactly one JSON document to stdout; human text goes to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import anyio
import typer

from pincer.cli.console import stderr, stderr_console
from pincer.core.errors import ClientCapabilityMissing, ConfigError, PincerError, UsageError, VersionExists, error_class

if TYPE_CHECKING:
    from pincer.service import Pincer

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "stderr",
    "stderr_console",
    "pincer_home",
    "secret_key",
    "audit_key",
    "open_pincer",
    "run",
    "emit_json",
    "fail",
    "JsonOption",
    "startup_notice",
]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
T = TypeVar("T")


JsonOption = typer.Option(False, "--json", help="Write one JSON document to stdout.")


def pincer_home() -> Path:
    raw = os.environ.get("PINCER_HOME")
    home = Path(raw).expanduser() if raw else Path.home() / ".pincer"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def secret_key(home: Path) -> bytes:
    from pincer.secrets.store import load_or_create_key

    return load_or_create_key(home, os.environ.get("PINCER_SECRET_KEY"))


def audit_key(home: Path) -> bytes:
    from pincer.secrets.keys import AUDIT_KEY, load_or_create_key

    return load_or_create_key(home, os.environ.get(AUDIT_KEY.env_name), place=AUDIT_KEY)


@asynccontextmanager
async def open_pincer(
    *, builtins: bool = True, quiet: bool = False, config: Any = None, for_tool: str | None = None
) -> AsyncIterator[Pincer]:
    """The ``Pincer`` of PINCER_HOME (with ``config`` when the command loaded it already). A start
    that takes more than a second (MCP servers launched with npx fetch their package first) says
    what it waits for on stderr, unless ``quiet`` (commands pass ``quiet=as_json``). ``for_tool``:
    the one tool the command calls; only the MCP servers that may own it start."""
    from pincer.cli.progress import slow_wait
    from pincer.cli.startup_gc import startup_done
    from pincer.service import Pincer

    home = pincer_home()
    async with AsyncExitStack() as stack:
        starts = _starts_for(for_tool)
        with slow_wait(lambda: startup_notice(home, starts=starts), enabled=not quiet):
            pincer = await stack.enter_async_context(
                Pincer.open(
                    home,
                    config=config,
                    secret_key=secret_key(home),
                    audit_key=audit_key(home),
                    builtins=builtins,
                    environ=os.environ,
                    mcp_starts=starts,
                )
            )
        startup_done()  # the start-up's objects are made: the collector's thresholds come back
        yield pincer


def _starts_for(tool: str | None) -> Callable[[str], bool] | None:
    if tool is None:
        return None
    from pincer.runtimes.mcp.config import may_own_tool

    return lambda server: may_own_tool(server, tool)


def startup_notice(home: Path, *, starts: Callable[[str], bool] | None = None) -> str:
    """What a slow start is waiting for: the MCP servers started with pincer, if any."""
    try:
        from pincer.runtimes.mcp import PinStore, ServerStore

        pins = PinStore(home)
        starting = [s for s in ServerStore(home).load()
                    if (s.startup == "eager" or not pins.pins(s.name)) and (starts is None or starts(s.name))]  # fmt: skip
    except PincerError:
        starting = []
    if not starting:
        return f"opening {home}"
    names = ", ".join(s.name for s in starting)
    npx = any(Path(s.command or "").name in ("npx", "uvx", "bunx") for s in starting)
    return f"starting MCP servers: {names}" + (" (npx/uvx fetch a server's package the first time)" if npx else "")


_NOT_USAGE = (ClientCapabilityMissing, VersionExists)


def exit_code_for(error: PincerError | dict[str, Any]) -> int:
    code = error.code if isinstance(error, PincerError) else str(error.get("code", ""))
    cls = error_class(code)
    # The caller asked for something malformed, or the settings are: exit 2, as for a bad flag.
    # A version published already is a well-formed request the hub's state refuses: exit 1.
    is_usage = cls is not None and issubclass(cls, (UsageError, ConfigError)) and cls not in _NOT_USAGE
    return EXIT_USAGE if is_usage else EXIT_FAILURE


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error_markup(message: str, hint: str | None = None, *, code: str = "error") -> list[str]:
    """The rich markup :func:`print_error` prints. The text is escaped: a hint naming
    ``[network]`` must print as written, not vanish as rich markup."""
    from rich.markup import escape

    lines = [f"[bold red]{escape(code)}:[/] {escape(message)}"]
    if hint:
        lines.append(f"[dim]hint: {escape(hint)}[/]")
    return lines


def print_error(message: str, hint: str | None = None, *, code: str = "error") -> None:
    """An error and its hint on stderr (:func:`error_markup`)."""
    for line in error_markup(message, hint, code=code):
        stderr.print(line)


def fail(error: PincerError, *, as_json: bool = False) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": error.to_dict()})
    else:
        print_error(error.message, error.hint)
    raise typer.Exit(exit_code_for(error))


EXIT_TERMINATED = 128 + signal.SIGTERM


class _Terminated(Exception):
    """SIGTERM reached a command: its body was cancelled (and recorded what it had to)."""


def run(fn: Callable[[], Awaitable[T]], *, as_json: bool = False, backend_options: dict[str, Any] | None = None,
        on_sigterm: bool = True) -> T:  # fmt: skip
    """Run an async command body, turning pincer errors into messages and exit codes. SIGTERM
    cancels the body as Ctrl-C does, so what a cancellation records (a call waiting on an
    approval: its audit record) is recorded before the command exits 143; ``on_sigterm=False``
    leaves SIGTERM to the body (``pincer serve``: uvicorn's graceful shutdown)."""
    try:
        # Signals reach the main thread only (a command run in a worker thread, as tests do, has none).
        if not on_sigterm or threading.current_thread() is not threading.main_thread():
            return anyio.run(fn, backend_options=backend_options)
        return anyio.run(_terminable, fn, backend_options=backend_options)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    except KeyboardInterrupt:
        stderr.print("interrupted")
        raise typer.Exit(130) from None
    except _Terminated:
        stderr.print("terminated")
        raise typer.Exit(EXIT_TERMINATED) from None


async def _terminable(fn: Callable[[], Awaitable[T]]) -> T:
    """``fn()`` cancelled through anyio's own cancel scope on SIGTERM or the first Ctrl-C. Left to
    asyncio, Ctrl-C cancels the task natively, and a native cancel that lands while one of the
    body's own deadlines fires (an approval wait polls under ``move_on_after``) can be taken for
    that deadline's and lost: the command then waited on, for the whole approval timeout. A
    second Ctrl-C meets Python's default handler and ends the program at once."""
    done: list[T] = []
    failed: list[Exception] = []
    stopped_by: list[int] = []  # the signal that cancelled the body, if one did
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for received in signals:
                    stopped_by.append(received)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signal)
        try:
            done.append(await fn())
        except Exception as exc:  # noqa: BLE001 - raised below, outside the task group (no ExceptionGroup)
            failed.append(exc)
        finally:
            tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    if stopped_by and not done:
        raise KeyboardInterrupt if stopped_by[0] == signal.SIGINT else _Terminated
    return done[0]


def parse_json_arg(text: str, *, what: str = "--args") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint=f"""quote it for the shell, for example {what} '{{"text": "hi"}}'""",
        ) from None
