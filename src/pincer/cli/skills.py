"""``pincer skills``: list, show, check, render and select skills; install their dependencies;
fetch skills from an MCP server and approve their allowed-tools."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, fail, pincer_home, run, stderr
from pincer.core.errors import PincerError, SkillError, UsageError

app = typer.Typer(help="Skills: list, show, check, render, select; dependencies; skills from MCP servers.", no_args_is_help=True)


def _library() -> Any:
    from pincer.config import load_config
    from pincer.skills.library import SkillLibrary

    return SkillLibrary.from_config(load_config(pincer_home()))


@contextmanager
def _guard(as_json: bool) -> Iterator[None]:
    """Pincer errors become a message (or one JSON document) and the exit code."""
    try:
        yield
    except PincerError as exc:
        fail(exc, as_json=as_json)


def _row(library: Any, skill: Any) -> dict[str, Any]:
    eligibility = library.eligibility_of(skill.name)
    return {
        "name": skill.name,
        "description": skill.description,
        "path": str(skill.path),
        "root": skill.root,
        "dialect": skill.dialect.value,
        "trust": skill.trust.value,
        "eligible": eligibility.is_eligible,
        "why_not": list(eligibility.reasons),
        "user_invocable": skill.user_invocable,
        "model_invocable": skill.model_invocable,
        "triggers": [str(t) for t in skill.triggers],
        "warnings": [str(w) for w in skill.warnings],
    }


@app.command("list")
def list_skills(
    show_all: bool = typer.Option(False, "--all", help="Also the shadowed skills (and why), load errors and limits hit."),
    as_json: bool = JsonOption,
) -> None:
    """Every skill: name, description, path, root, dialect, trust, eligible or why not, triggers, warnings."""
    with _guard(as_json):
        library = _library()
    report = library.report
    rows = [_row(library, s) for s in library.skills]
    document: dict[str, Any] = {"skills": rows}
    if show_all:
        document["shadowed"] = [s.to_dict() for s in report.shadowed]
        document["errors"] = [e.to_dict() for e in report.errors]
        document["limits"] = [h.to_dict() for h in report.limits]
        document["roots"] = [r.to_dict() for r in report.roots]
    if as_json:
        emit_json(document)
        return
    table = Table(title=f"{len(rows)} skills", title_justify="left")
    for column in ("name", "root", "dialect", "trust", "eligible", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        eligible = "yes" if row["eligible"] else "no: " + "; ".join(row["why_not"])
        table.add_row(row["name"], row["root"], row["dialect"], row["trust"], eligible, row["description"][:100])
    stderr.print(table)
    for row in rows:
        for warning in row["warnings"]:
            stderr.print(f"[yellow]warning[/] {row['name']}: {warning}")
    if show_all:
        for item in report.shadowed:
            stderr.print(f"[dim]shadowed[/] {item.skill.name} ({item.skill.path}): {item.reason}")
        for error in report.errors:
            stderr.print(f"[red]error[/] {error}")
        for hit in report.limits:
            stderr.print(f"[yellow]limit[/] {hit.message}")
    if report.errors and not show_all:
        stderr.print(f"{len(report.errors)} SKILL.md file(s) could not be loaded: `pincer skills check` shows why")


@app.command("show")
def show_skill(name: str, as_json: bool = JsonOption) -> None:
    """One skill: everything it declares, whether it is eligible, its files and its body."""
    from pincer.skills.files import list_files

    with _guard(as_json):
        library = _library()
        skill = library.get(name)
    data = skill.to_dict()
    data["eligibility"] = library.eligibility_of(name).to_dict()
    data["files"] = [f.to_dict() for f in list_files(skill).files]
    data["body"] = skill.body
    if as_json:
        emit_json(data)
        return
    stderr.print(f"[bold]{skill.name}[/] {skill.version or ''} ({skill.dialect.value}, {skill.trust.value}, {skill.root})")
    stderr.print(skill.description)
    stderr.print(f"path: {skill.path}")
    stderr.print(f"eligible: {library.eligibility_of(name).reason}")
    for key in ("tools", "triggers", "tags"):
        if data[key]:
            stderr.print(f"{key}: {', '.join(str(v) if not isinstance(v, dict) else str(v.get('value') or v.get('type')) for v in data[key])}")
    for param in skill.parameters:
        extra = f" = {param.default!r}" if param.default is not None else (" (required)" if param.required else "")
        stderr.print(f"param {param.name}: {param.type.value}{extra}  {param.description}")
    for warning in skill.warnings:
        stderr.print(f"[yellow]warning[/] {warning}")
    stderr.print("files: " + ", ".join(f["path"] for f in data["files"]))
    sys.stdout.write(skill.body if skill.body.endswith("\n") else skill.body + "\n")


@app.command("check")
def check_skills(
    paths: list[Path] = typer.Argument(None, help="SKILL.md files, skill folders or roots; default: every root."),
    as_json: bool = JsonOption,
) -> None:
    """Every warning and error of every skill (or of PATHs). Exit 1 when any file cannot be loaded."""
    from pincer.skills.model import Trust
    from pincer.skills.roots import LoadError, Root, SkillLoader, read_skill

    with _guard(as_json):
        if paths:
            skills: list[Any] = []
            errors: list[Any] = []
            limits: list[Any] = []
            loader = SkillLoader()
            for index, path in enumerate(paths):
                target = path.expanduser()
                root = Root(label=f"check-{index + 1}", path=target, trust=Trust.TRUSTED)
                if target.is_file():
                    result = read_skill(target, root=root)
                    (errors if isinstance(result, LoadError) else skills).append(result)
                elif (target / "SKILL.md").is_file():
                    result = read_skill(target / "SKILL.md", root=root)
                    (errors if isinstance(result, LoadError) else skills).append(result)
                elif target.is_dir():
                    report = loader.load([root])
                    skills += list(report.skills) + [s.skill for s in report.shadowed]
                    errors += list(report.errors)
                    limits += list(report.limits)
                else:
                    errors.append(LoadError(path=target, message="no such file or folder", hint="pass a SKILL.md, a skill folder or a root"))
        else:
            library = _library()
            skills = list(library.skills) + [s.skill for s in library.report.shadowed]
            errors = list(library.report.errors)
            limits = list(library.report.limits)
    document = {
        "ok": not errors,
        "skills": [{"name": s.name, "path": str(s.path), "dialect": s.dialect.value, "warnings": [w.to_dict() for w in s.warnings]} for s in skills],
        "errors": [e.to_dict() for e in errors],
        "limits": [h.to_dict() for h in limits],
        "warning_count": sum(len(s.warnings) for s in skills),
    }
    if as_json:
        emit_json(document)
    else:
        for skill in skills:
            if not skill.warnings:
                stderr.print(f"[green]ok[/] {skill.name} ({skill.path})")
            for warning in skill.warnings:
                stderr.print(f"[yellow]warning[/] {skill.path}: {warning}")
        for error in errors:
            stderr.print(f"[red]error[/] {error}" + (f" [dim]({error.hint})[/]" if error.hint else ""))
        for hit in limits:
            stderr.print(f"[yellow]limit[/] {hit.message}")
        stderr.print(f"{len(skills)} skills, {document['warning_count']} warnings, {len(errors)} errors")
    if errors:
        raise typer.Exit(EXIT_FAILURE)


@app.command("render")
def render(
    name: str,
    param: list[str] = typer.Option(None, "--param", "-p", help="KEY=VALUE for a declared parameter (repeatable)."),
    arguments: str | None = typer.Option(None, "--arguments", help="Free-text arguments ($ARGUMENTS)."),
    as_json: bool = JsonOption,
) -> None:
    """Render a skill's instructions with its parameters (validated, coerced, defaults applied)."""
    from pincer.skills.render import parse_param_pairs

    with _guard(as_json):
        library = _library()
        rendered = library.render(name, parse_param_pairs(param or []), arguments=arguments)
    if as_json:
        emit_json(rendered.to_dict())
        return
    sys.stdout.write(rendered.text if rendered.text.endswith("\n") else rendered.text + "\n")


@app.command("select")
def select_skills(message: str, as_json: bool = JsonOption) -> None:
    """The skills chosen for MESSAGE, with their scores (within [skills] max_selected and max_selected_tokens)."""
    with _guard(as_json):
        library = _library()
        chosen = library.select(message)
    if as_json:
        emit_json({"message": message, "selected": [c.to_dict() for c in chosen]})
        return
    if not chosen:
        stderr.print("no skill matches")
        return
    for item in chosen:
        sys.stdout.write(f"{item.skill.name}\t{item.score}\t{', '.join(item.reasons)}\n")


@app.command("catalog")
def catalog(as_json: bool = JsonOption) -> None:
    """The <available_skills> block a model is given."""
    with _guard(as_json):
        built = _library().catalog()
    if as_json:
        emit_json(built.to_dict())
        return
    sys.stdout.write(built.text)


@app.command("deps")
def deps(name: str, as_json: bool = JsonOption) -> None:
    """Install (again) a skill's dependencies in the sandbox, into $PINCER_HOME/skill-deps/NAME."""

    async def body() -> dict[str, Any]:
        from pincer.cli.common import secret_key
        from pincer.service import Pincer

        home = pincer_home()
        async with Pincer.open(home, secret_key=secret_key(home), builtins=False, external=False, wasm=False) as pincer:
            if pincer.skills is None:
                raise UsageError("skills are disabled", hint="set [skills] enabled = true in config.toml")
            result = await pincer.install_skill_deps(name)
            return result.to_dict()

    result = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **result})
        return
    stderr.print(f"installed {', '.join(result['managers'])} dependencies of {name} into {result['path']}")


@app.command("approve")
def approve(name: str, as_json: bool = JsonOption) -> None:
    """Approve a skill an agent could have written (a workspace skill, or one a run wrote: it is
    trusted from now on, for this SKILL.md), or the allowed-tools of a skill fetched from an MCP
    server. A changed SKILL.md needs approving again."""
    from pincer.skills.remote import RemoteApprovals, read_origin
    from pincer.skills.roots import WORKSPACE_ROOTS

    with _guard(as_json):
        library = _library()
        winner = library.get(name)
        candidates = [winner, *(s.skill for s in library.report.shadowed if s.skill.name == winner.name)]
        approvals = RemoteApprovals(pincer_home())
        writable = next((s for s in candidates if s.root in WORKSPACE_ROOTS or "pincer/writtenByRun" in s.metadata), None)
        if writable is not None and not read_origin(writable.base_dir):
            entry = approvals.approve_trust(writable, by="cli")
            what = f"approved {name} ({writable.path}) as trusted; a change to it needs approving again"
        else:
            origin = read_origin(winner.base_dir)
            if not origin:
                raise UsageError(
                    f"skill {name!r} is neither in the workspace nor written by a run nor fetched from an MCP server; "
                    "there is nothing to approve",
                    hint="`pincer skills show " + name + "`",
                )
            pending = tuple(winner.metadata.get("pincer/pendingTools", ())) or winner.tools
            entry = approvals.approve(winner, pending, by="cli")
            what = f"approved allowed-tools of {name}: {' '.join(pending) or '(none)'}"
    if as_json:
        emit_json({"ok": True, "name": name, **entry})
        return
    stderr.print(what)


@app.command("pull")
def pull(
    url: str = typer.Argument(..., help="The MCP server's streamable HTTP URL, e.g. http://127.0.0.1:8765/mcp"),
    token: str | None = typer.Option(None, "--token", help="Bearer token for the server."),
    name: list[str] = typer.Option(None, "--name", help="Only these skills (repeatable)."),
    as_json: bool = JsonOption,
) -> None:
    """Fetch skills from an MCP server (skills extension), verify every file against its digest,
    install them under $PINCER_HOME/installed/skills. Their allowed-tools wait for `pincer skills approve`."""

    async def body() -> dict[str, Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from pincer.skills.remote import fetch_remote_skills

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with httpx2.AsyncClient(headers=headers, trust_env=False, timeout=60.0) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="auto") as client:
                    installed, refused = await fetch_remote_skills(client, server=url, home=pincer_home(), names=tuple(name or ()))
        except PincerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the transport and SDK raise many kinds (HTTP, MCPError, groups)
            raise SkillError(f"cannot fetch skills from {url}: {type(exc).__name__}: {exc}", source=url, hint="check the URL and --token") from None
        return {"installed": [i.to_dict() for i in installed], "refused": refused}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": not result["refused"], **result})
    else:
        for item in result["installed"]:
            stderr.print(f"installed {item['name']} ({item['files']} files) into {item['path']}")
        for reason in result["refused"]:
            stderr.print(f"[red]refused[/] {reason}")
    if result["refused"]:
        raise typer.Exit(EXIT_FAILURE)

