"""``pincer sandbox``: what isolation works on this machine, and why the rest does not."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pincer.cli.common import fail
from pincer.core.errors import PincerError
from pincer.runtimes.script.detect import probe_all
from pincer.runtimes.script.settings import ScriptSettings

__all__ = ["app"]

app = typer.Typer(help="Inspect the sandbox that script tools run in.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Sandbox commands."""


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="write one JSON document to stdout")] = False,
    bwrap: Annotated[Path | None, typer.Option(help="a bwrap binary to try first")] = None,
    image: Annotated[str | None, typer.Option(help="container image for docker/podman")] = None,
) -> None:
    """Run a real /bin/true through every backend and report what works here."""
    try:
        settings = _settings(bwrap=bwrap, image=image)
        report = probe_all(settings)
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        _render(report)
    raise typer.Exit(0 if report["selected"] else 1)


def _settings(*, bwrap: Path | None, image: str | None) -> ScriptSettings:
    """The ``[sandbox]`` settings of config.toml (when there is one), the options on top: the
    report must describe the backend pincer would really choose."""
    from pincer.config import load_config

    raw = os.environ.get("PINCER_HOME")
    home = Path(raw).expanduser() if raw else Path.home() / ".pincer"
    config = load_config(home)  # a missing file gives the defaults; nothing is created
    return ScriptSettings(
        backend=config.sandbox_backend,
        container_image=image or config.sandbox_container_image,
        bwrap_path=bwrap,
        workdir_max_bytes=config.sandbox_workdir_max_bytes,
    )


def _render(report: dict[str, Any]) -> None:
    console = Console(stderr=True)  # its own: this table follows COLUMNS
    table = Table(title="sandbox backends")
    for column in ("backend", "works", "version", "smoke ms", "why"):
        table.add_column(column)
    for b in report["backends"]:
        why = b["reason"] + (f"\n→ {b['hint']}" if b["hint"] and not b["available"] else "")
        smoke = "" if b["smoke_ms"] is None else f"{b['smoke_ms']:.1f}"
        name = b["name"] + (f"\n{b['path']}" if b["path"] else "") + (f"\n(runs {b['copy']})" if b.get("copy") else "")
        # Reasons quote other programs and name config keys in brackets: text, not rich markup.
        table.add_row(escape(name), "yes" if b["available"] else "no", escape(b["version"] or ""), smoke, escape(why))
    console.print(table)
    cg = report["cgroups"]
    limits = report["limits"]["memory_and_pids"]
    console.print(escape(f"cgroups: {cg['version']} ({cg['reason']}); memory and process limits: {limits}"))
    sc = report["seccomp"]
    console.print(escape(f"seccomp deny list: {'yes' if sc['available'] else 'no'} ({sc['detail']})"))
    console.print(escape(f"network allowlist relay: {report['relay_python'] or 'unavailable (needs python3 under /usr)'}"))
    console.print(escape(f"selected: {report['selected'] or 'none: script tools will refuse to run'}"))
