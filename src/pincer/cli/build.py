"""``pincer build`` and ``pincer builds list|show|prepare``: the tool builder at the terminal.

One line per stage on stderr with its time; ``--json`` writes the report to stdout. The model is
``[llm]`` (or ``--profile``); the runner component is built once per machine into the XDG cache
folder (``~/.cache/pincer/runner``; ``PINCER_RUNNER_CACHE`` points elsewhere, e.g. a CI cache),
shared by every home, by ``pincer builds prepare`` (which ``make setup`` runs) or the first build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, pincer_home, run, stderr

__all__ = ["build", "builds_app"]

builds_app = typer.Typer(help="List and show recorded builds: stages, failures, diffs between iterations.", no_args_is_help=True)


def _progress(quiet: bool) -> Any:
    def show(stage: str, seconds: float, detail: str) -> None:
        if not quiet:
            stderr.print(f"{stage:<9} {seconds:7.3f} s  {detail}", markup=False, highlight=False)

    return show


def build(
    description: str = typer.Argument(..., help="What the tool should do, in plain words (with --edit: the change)."),
    name: str | None = typer.Option(None, "--name", help="The tool's name (else the model's)."),
    allow_host: list[str] | None = typer.Option(None, "--allow-host", help="A host the tool may call over https (repeat)."),
    secret: list[str] | None = typer.Option(None, "--secret", help="A secret the tool may use, injected by the host (repeat)."),
    profile: str | None = typer.Option(None, "--profile", help="An [llm.profiles.NAME] to build with."),
    max_iterations: int = typer.Option(4, "--max-iterations", min=1, max=20, help="Answers of the model to fix failures."),
    edit: str | None = typer.Option(None, "--edit", help="Start from this recorded build; DESCRIPTION is the change."),
    replace: bool = typer.Option(False, "--replace", help="Let the build replace a tool of the same name (else it stops after the plan)."),
    standalone: bool = typer.Option(False, "--standalone", help="Build a standalone component (componentize-py, ~30 s)."),
    as_json: bool = JsonOption,
) -> None:
    """Describe a tool; pincer plans, writes, tests (in WASM), signs and registers it."""
    from pincer.builder.build import BuildRequest
    from pincer.builder.service import run_build
    from pincer.cli.acts import cli_actor

    request = BuildRequest(description=description, name=name or edit, hosts=tuple(allow_host or ()), replace=replace,
                           secrets=tuple(secret or ()), max_iterations=max_iterations, standalone=standalone, edit=edit)  # fmt: skip
    cache = os.environ.get("PINCER_RUNNER_CACHE")  # else the builder's default: the XDG cache folder

    async def body() -> Any:
        async with open_pincer(quiet=as_json) as pincer:
            return await run_build(pincer.builder_services(), request, actor=cli_actor(), profile=profile,
                                   runner_cache=Path(cache) if cache else None, progress=_progress(as_json))  # fmt: skip

    report = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "build": report.to_json()})
        return
    for line in report.dropped:
        stderr.print(f"dropped: {line}", markup=False, highlight=False)
    reach = ", ".join(report.hosts) or "no host"
    secrets = ", ".join(s["name"] for s in report.secrets) or "no secret"
    stderr.print(
        f"built {report.key}@{report.version} (signed by {report.signer}): reaches {reach}, uses {secrets}; "
        f"{report.tests_passed}/{report.tests_total} tests passed in {report.iterations} iteration(s); "
        f"{report.tokens.get('input_tokens', 0)}+{report.tokens.get('output_tokens', 0)} tokens; {report.seconds:.2f} s",
        markup=False, highlight=False,
    )  # fmt: skip


@builds_app.command("prepare")
def prepare(as_json: bool = JsonOption) -> None:
    """Build the shared runner now (once per machine, ~30 s), so the first build does not wait."""
    from pincer.builder.runner import default_cache_dir, prepare_runner

    cache_dir = default_cache_dir(os.environ, pincer_home())
    if not as_json:
        stderr.print(f"runner cache: {cache_dir} (building the runner once per machine takes ~30 s)", markup=False)
    wasm, built = run(lambda: _prepare(prepare_runner, cache_dir), as_json=as_json)
    if as_json:
        emit_json({"ok": True, "runner": str(wasm), "built": built})
        return
    stderr.print(f"{'built' if built else 'already built'}: {wasm}", markup=False, highlight=False)


async def _prepare(prepare_runner: Any, cache_dir: Path) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(prepare_runner, cache_dir)


@builds_app.command("list")
def list_builds(as_json: bool = JsonOption) -> None:
    """Every recorded build: name, result, version, iterations, time."""
    from pincer.builder.record import list_builds as read
    from pincer.cli.triggers import open_for_triggers

    async def body() -> list[dict[str, Any]]:
        async with open_for_triggers() as pincer:  # no tools: only the secrets are needed
            # A value stored as a secret after the build was recorded is masked here, at display.
            shown: list[dict[str, Any]] = pincer.shown(read(pincer_home()))
            return shown

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        state = "ok" if row.get("ok") else "failed"
        stderr.print(f"{row['name']:<24} {state:<7} {row.get('version') or '-':<8} {row.get('iterations')} iteration(s)  "
                     f"{(row.get('seconds') or 0):.2f} s", markup=False, highlight=False)  # fmt: skip
    if not rows:
        stderr.print("no builds yet: `pincer build \"DESCRIPTION\"` makes one", markup=False, highlight=False)


@builds_app.command("show")
def show_build(name: str, as_json: bool = JsonOption) -> None:
    """One build: its stages with their times, failures, and the diffs between iterations."""
    from pincer.builder.record import iteration_diffs, read_build
    from pincer.cli.triggers import open_for_triggers

    home = pincer_home()

    def body() -> dict[str, Any]:
        data = dict(read_build(home, name) or {})
        data["diffs"] = iteration_diffs(home, name)
        return data

    async def wrapped() -> dict[str, Any]:
        async with open_for_triggers() as pincer:  # no tools: only the secrets are needed
            # A value stored as a secret after the build was recorded is masked here, at display.
            shown: dict[str, Any] = pincer.shown(body())
            return shown

    data = run(wrapped, as_json=as_json)
    if as_json:
        emit_json(data)
        return
    for stage in data.get("stages", []):
        stderr.print(f"{stage['stage']:<9} {stage['seconds']:7.3f} s  {stage['detail']}", markup=False, highlight=False)
    for failure in data.get("failures", []):
        stderr.print(f"failure: {failure}", markup=False, highlight=False)
    for diff in data.get("diffs", []):
        stderr.print(diff, markup=False, highlight=False)
