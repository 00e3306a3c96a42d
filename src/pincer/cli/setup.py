"""``pincer init`` (a commented config.toml) and ``pincer config check|path|show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, fail, pincer_home, stderr
from pincer.core.errors import ConfigError, UsageError

__all__ = ["config_app", "init"]

config_app = typer.Typer(help="Check, locate and show the settings files.", no_args_is_help=True)


def init(
    force: bool = typer.Option(False, "--force", help="Replace an existing config.toml (kept as config.toml.bak)."),
    as_json: bool = JsonOption,
) -> None:
    """Write a commented config.toml with every default.

    Every setting is written commented out at its default, with what it does; uncomment a line
    to change it. An existing file is left alone unless --force.
    """
    from pincer.config import CONFIG_FILENAME
    from pincer.config_check import check_config_text
    from pincer.config_template import render_template
    from pincer.store.jsonfile import write_bytes_atomic

    home = pincer_home()
    path = home / CONFIG_FILENAME
    try:
        if path.exists() and not force:
            raise UsageError(
                f"{path} exists; nothing was written",
                hint="`pincer config check` checks it; `pincer init --force` replaces it (the old one is kept as config.toml.bak)",
            )
        text = render_template()
        problems = check_config_text(text, home=home)
        if problems:  # a template that does not parse must never replace a working file
            raise ConfigError(f"the generated config.toml does not parse: {problems[0].message}", hint="report this as a pincer bug")
        backup = None
        if path.exists():
            backup = path.with_name(CONFIG_FILENAME + ".bak")
            write_bytes_atomic(backup, path.read_bytes())
        write_bytes_atomic(path, text.encode("utf-8"), mode=0o600)
    except (UsageError, ConfigError) as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "path": str(path), "backup": str(backup) if backup else None})
    else:
        stderr.print(f"wrote {path}" + (f" (the old one is {backup})" if backup else ""))
        stderr.print("every setting is commented out at its default; `pincer config check` checks your changes")


@config_app.command("check")
def check(
    file: Path | None = typer.Argument(None, help="A config.toml to check (default: $PINCER_HOME/config.toml)."),
    as_json: bool = JsonOption,
) -> None:
    """Check config.toml and the other settings files; print every problem with its key.

    Also checks exec-approvals.json, the MCP server list, the OpenAPI services and the installed
    script tool manifests under PINCER_HOME. Exit 0 when all are valid, 1 on any problem.
    """
    from pincer.config_check import check_home

    if file is not None and not file.is_file():
        fail(UsageError(f"{file} does not exist or is not a file", hint="give the path of a config.toml"), as_json=as_json)
    reports = check_home(pincer_home(), config_file=file)
    ok = all(r.is_ok for r in reports)
    if as_json:
        emit_json({"ok": ok, "files": [r.to_dict() for r in reports]})
    else:
        for report in reports:
            _render_report(report)
        count = sum(len(r.problems) for r in reports)
        stderr.print("all settings files are valid" if ok else f"[bold red]{count} problem{'s' if count != 1 else ''}[/]")
    if not ok:
        raise typer.Exit(EXIT_FAILURE)


def _render_report(report: Any) -> None:
    if not report.exists:
        stderr.print(f"[dim]-    {report.kind}: {report.path} (absent: defaults apply)[/]", highlight=False)
        return
    if report.is_ok:
        stderr.print(f"[green]ok[/]   {report.kind}: {report.path}", highlight=False)
        return
    stderr.print(f"[bold red]fail[/] {report.kind}: {report.path}", highlight=False)
    for problem in report.problems:
        # markup off: keys and messages quote the user's file, which may hold "[...]"
        where = f"{problem.key}: " if problem.key else ""
        stderr.print(f"     {where}{problem.message}", markup=False, highlight=False)
        if problem.hint:
            stderr.print(f"     hint: {problem.hint}", markup=False, highlight=False, style="dim")


@config_app.command("path")
def path(as_json: bool = JsonOption) -> None:
    """Print where pincer keeps its settings and state under PINCER_HOME."""
    from pincer.config_check import settings_files

    home = pincer_home()
    files = {
        "home": home,
        **settings_files(home),
        "database": home / "pincer.db",
        "secrets": home / "secrets.db",
        "secret key": home / "secret.key",
        "gateway token": home / "gateway.token",
    }
    data = {kind: {"path": str(p), "exists": p.exists()} for kind, p in files.items()}
    if as_json:
        emit_json(data)
        return
    width = max(len(kind) for kind in data)
    for kind, entry in data.items():
        stderr.print(f"{kind.ljust(width)}  {entry['path']}" + ("" if entry["exists"] else "  (absent)"), highlight=False)


@config_app.command("show")
def show(as_json: bool = JsonOption) -> None:
    """Print the settings in force: config.toml with every default filled in."""
    import tomllib

    from pincer.config import CONFIG_FILENAME, ConfigFile, load_config
    from pincer.config_template import render_settings

    home = pincer_home()
    try:
        load_config(home)  # refuse what pincer itself would refuse, with its message
        config_file = home / CONFIG_FILENAME
        raw = tomllib.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
        data = ConfigFile.model_validate(raw)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json(data.model_dump(mode="json"))
    else:
        typer.echo(render_settings(data), nl=False)
