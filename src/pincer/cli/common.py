"""What every command shares: PINCER_HOME, the secret key, exit codes, output on the right stream.

Exit codes: 0 success, 1 failure (a tool error, a denial), 2 usage error. With ``--json`` a
command writes exactly one JSON document to stdout; human text goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import typer
from rich.console import Console

from pincer.core.errors import PincerError, UsageError

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "stderr",
    "pincer_home",
    "secret_key",
    "open_pincer",
    "run",
    "emit_json",
    "fail",
    "JsonOption",
]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
# A terminal gives its own width; piped or logged output gets room for the wide tables.
stderr = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
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


@asynccontextmanager
async def open_pincer(*, builtins: bool = True) -> AsyncIterator[Any]:
    from pincer.service import Pincer

    home = pincer_home()
    async with Pincer.open(home, secret_key=secret_key(home), builtins=builtins) as pincer:
        yield pincer


def exit_code_for(error: PincerError | dict[str, Any]) -> int:
    code = error.code if isinstance(error, PincerError) else str(error.get("code", ""))
    usage_codes = {"usage_error", "tool_not_found", "invalid_arguments", "idempotency_conflict", "config_error", "skill_not_found"}
    return EXIT_USAGE if code in usage_codes else EXIT_FAILURE


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def fail(error: PincerError, *, as_json: bool = False) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": error.to_dict()})
    else:
        stderr.print(f"[bold red]error:[/] {error.message}")
        if error.hint:
            stderr.print(f"[dim]hint: {error.hint}[/]")
    raise typer.Exit(exit_code_for(error))


def run(fn: Callable[[], Awaitable[T]], *, as_json: bool = False, backend_options: dict[str, Any] | None = None) -> T:
    """Run an async command body, turning pincer errors into messages and exit codes."""
    try:
        return anyio.run(fn, backend_options=backend_options)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    except KeyboardInterrupt:
        stderr.print("interrupted")
        raise typer.Exit(130) from None


def parse_json_arg(text: str, *, what: str = "--args") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint=f"""quote it for the shell, for example {what} '{{"text": "hi"}}'""",
        ) from None
