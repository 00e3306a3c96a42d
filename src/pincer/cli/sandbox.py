"""``pincer sandbox``: what isolation works on this machine, and why the rest does not."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

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
    settings = ScriptSettings(bwrap_path=bwrap, container_image=image)
    report = probe_all(settings)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        _render(report)
    raise typer.Exit(0 if report["selected"] else 1)


def _render(report: dict[str, Any]) -> None:
    console = Console(stderr=True)
    table = Table(title="sandbox backends")
    for column in ("backend", "works", "version", "smoke ms", "why"):
        table.add_column(column)
    for b in report["backends"]:
        why = b["reason"] + (f"\n→ {b['hint']}" if b["hint"] and not b["available"] else "")
        smoke = "" if b["smoke_ms"] is None else f"{b['smoke_ms']:.1f}"
        table.add_row(b["name"], "yes" if b["available"] else "no", b["version"] or "", smoke, why)
    console.print(table)
    cg = report["cgroups"]
    console.print(f"cgroups: {cg['version']} ({cg['reason']}); memory and process limits: {report['limits']['memory_and_pids']}")
    sc = report["seccomp"]
    console.print(f"seccomp deny list: {'yes' if sc['available'] else 'no'} ({sc['detail']})")
    console.print(f"network allowlist relay: {report['relay_python'] or 'unavailable (needs python3 under /usr)'}")
    console.print(f"selected: {report['selected'] or 'none: script tools will refuse to run'}")
