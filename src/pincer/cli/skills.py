"""``pincer skills``: list, show, check, render and select skills; install their dependencies;
fetch skills from an MCP server and approve their allowed-tools."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from pincer.cli.acts import cli_actor, record_act
from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, fail, pincer_home, run, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import PincerError, SkillError, UsageError

app = typer.Typer(help="Skills: list, show, check, render, select; dependencies; skills from MCP servers.", no_args_is_help=True)


def _library() -> Any:
    """The library as a running pincer sees it: installed skills checked against pincer.lock,
    so an edited one is refused here as it is by `pincer run` and the gateway."""
    from pincer.config import load_config
    from pincer.hub.integrity import IntegrityGuard
    from pincer.skills.library import SkillLibrary

    home = pincer_home()
    config = load_config(home)
    # A home whose registry is shared ([store] url) checks signatures too (hub/integrity.py).
    guard = IntegrityGuard(home, check_signatures=config.store.url is not None)
    return SkillLibrary.from_config(config, admit=lambda skill: guard.refusal("skill", skill.base_dir.name))


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
    document["misplaced"] = [m.to_dict() for m in report.misplaced]
    document["refused"] = [{"name": n, "reason": r} for n, r in library.refused.items()]
    if show_all:
        document["shadowed"] = [s.to_dict() for s in report.shadowed]
        document["errors"] = [e.to_dict() for e in report.errors]
        document["limits"] = [h.to_dict() for h in report.limits]
        document["roots"] = [r.to_dict() for r in report.roots]
    if as_json:
        emit_json(document)
        return
    title = f"{len(rows)} skills"
    if report.shadowed and not show_all:
        title += f" ({len(report.shadowed)} shadowed: `--all` shows them)"
    table = Table(title=title, title_justify="left")
    for column in ("name", "root", "dialect", "trust", "eligible", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        eligible = "yes" if row["eligible"] else "no: " + "; ".join(row["why_not"])
        table.add_row(row["name"], row["root"], row["dialect"], row["trust"], eligible, row["description"][:100])
    stderr.print(table)
    for row in rows:
        for warning in row["warnings"]:
            stderr.print(f"[yellow]warning[/] {row['name']}: {warning}")
    for notice in report.misplaced:
        stderr.print(f"[yellow]warning[/] {escape(str(notice))}")
    for item in report.shadowed:
        if show_all:
            stderr.print(f"[dim]shadowed[/] {item.skill.name} ({item.skill.path}): {item.reason}")
        if item.lost_commands:
            stderr.print(
                "[yellow]warning[/] " + escape(
                    f"{', '.join(item.lost_commands)} is gone: {item.skill.name} from {item.skill.root} declared it, and "
                    f"{item.by.name} from {item.by.root} ({item.by.path}), which shadows it, does not"
                )
            )
    if show_all:
        for error in report.errors:
            stderr.print(f"[red]error[/] {error}")
        for hit in report.limits:
            stderr.print(f"[yellow]limit[/] {hit.message}")
    if not show_all:
        for name, reason in library.refused.items():
            stderr.print("[red]refused[/] " + escape(f"{name}: {reason}"))
    others = len(report.errors) - len(library.refused)
    if others and not show_all:
        stderr.print(f"{others} SKILL.md file(s) could not be loaded: `pincer skills check` shows why")


def _offered_tools() -> set[str] | None:
    """The names of the tools this home offers (its registry, as `pincer tools list` builds it);
    None when it cannot be opened (then no tool warnings, rather than false ones)."""
    from pincer.cli.common import open_pincer

    async def body() -> set[str]:
        async with open_pincer(quiet=True) as pincer:
            return {spec.name for spec in pincer.registry.list()}

    try:
        return anyio.run(body)
    except Exception as exc:  # noqa: BLE001 - a home that cannot start still shows its skills
        stderr.print(escape(f"(tools not checked: the home's tools cannot be listed: {exc})"))
        return None


def _tool_warnings(skill: Any, offered: set[str] | None) -> list[Any]:
    from pincer.skills.tool_use import tool_problems

    return list(tool_problems(skill, offered)) if offered is not None else []


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
    tool_warnings = _tool_warnings(skill, _offered_tools())
    data["warnings"] += [str(w) for w in tool_warnings]
    if as_json:
        emit_json(data)
        return
    say = stderr.print
    say(escape(f"{skill.name} {skill.version or ''} ({skill.dialect.value}, {skill.trust.value}, {skill.root})"), style="bold")
    say(escape(skill.description))
    say(escape(f"path: {skill.path}"))
    say(escape(f"eligible: {library.eligibility_of(name).reason}"))
    for key in ("tools", "tags"):
        if data[key]:
            say(escape(f"{key}: {', '.join(data[key])}"))
    for trigger in skill.triggers:
        say(escape(f"trigger: {trigger}"))
    for key, value in data["activation"].items():
        if value and value != skill.activation.__class__().to_dict()[key]:
            say(escape(f"activation {key}: {', '.join(value) if isinstance(value, list) else value}"))
    for key, value in data["requires"].items():
        if value:
            say(escape(f"requires {key}: {', '.join(map(str, value)) if isinstance(value, list) else value}"))
    for capability in data["capabilities"]:
        say(escape(f"capability {capability.get('name')}: {capability.get('description') or ''}"))
    for key in ("license", "compatibility", "homepage", "when_to_use", "argument_hint"):
        if getattr(skill, key, None):
            say(escape(f"{key}: {getattr(skill, key)}"))
    if not skill.user_invocable or not skill.model_invocable or skill.always:
        flags = [f for f, on in (("not user-invocable", not skill.user_invocable),
                                 ("disable-model-invocation", not skill.model_invocable), ("always", skill.always)) if on]  # fmt: skip
        say(escape("invocation: " + ", ".join(flags)))
    for param in skill.parameters:
        extra = f" = {param.default!r}" if param.default is not None else (" (required)" if param.required else "")
        say(escape(f"param {param.name}: {param.type.value}{extra}  {param.description}"))
    for warning in list(skill.warnings) + tool_warnings:
        say("[yellow]warning[/] " + escape(str(warning)))
    say(escape("files: " + ", ".join(f["path"] for f in data["files"])))
    sys.stdout.write(skill.body if skill.body.endswith("\n") else skill.body + "\n")


@app.command("check")
def check_skills(
    paths: list[Path] = typer.Argument(None, help="SKILL.md files, skill folders or roots; default: every root."),
    spec: str | None = typer.Option(
        None, "--spec", help="Also check against a published spec: agentskills (the Agent Skills spec, as its reference validator)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Every warning and error of every skill (or of PATHs). Exit 1 when any file cannot be loaded,
    or, with --spec, breaks the spec."""
    from pincer.skills.model import Trust
    from pincer.skills.roots import LoadError, Root, SkillLoader, read_skill, skill_file

    with _guard(as_json):
        if spec not in (None, "agentskills"):
            raise UsageError(f"--spec {spec!r} is not a spec pincer checks", hint="use `pincer skills check --spec agentskills`")
        if paths:
            skills: list[Any] = []
            errors: list[Any] = []
            limits: list[Any] = []
            misplaced: list[Any] = []
            loader = SkillLoader()
            for index, path in enumerate(paths):
                target = path.expanduser()
                root = Root(label=f"check-{index + 1}", path=target, trust=Trust.TRUSTED)
                if target.is_file():
                    result = read_skill(target, root=root)
                    (errors if isinstance(result, LoadError) else skills).append(result)
                elif (own_file := skill_file(target)) is not None:
                    result = read_skill(own_file, root=root)
                    (errors if isinstance(result, LoadError) else skills).append(result)
                elif target.is_dir():
                    report = loader.load([root])
                    skills += list(report.skills) + [s.skill for s in report.shadowed]
                    errors += list(report.errors)
                    limits += list(report.limits)
                    misplaced += list(report.misplaced)
                    notice = loader.look_closer(root, str(target))
                    if notice is not None and notice.path.is_file():  # a skill folder whose file is skill.md
                        misplaced.append(notice)
                else:
                    errors.append(LoadError(path=target, message="no such file or folder", hint="pass a SKILL.md, a skill folder or a root"))
        else:
            library = _library()
            skills = list(library.skills) + [s.skill for s in library.report.shadowed]
            errors = list(library.report.errors)
            limits = list(library.report.limits)
            misplaced = list(library.report.misplaced)
    offered = _offered_tools() if skills else None
    warnings = {id(s): list(s.warnings) + _tool_warnings(s, offered) for s in skills}
    document = {
        "ok": not errors,
        "skills": [
            {"name": s.name, "path": str(s.path), "dialect": s.dialect.value, "warnings": [w.to_dict() for w in warnings[id(s)]]}
            for s in skills
        ],
        "errors": [e.to_dict() for e in errors],
        "limits": [h.to_dict() for h in limits],
        "misplaced": [m.to_dict() for m in misplaced],
        "warning_count": sum(len(w) for w in warnings.values()) + len(misplaced),
    }
    spec_findings = _spec_findings([s.path for s in skills] + [e.path for e in errors]) if spec else {}
    spec_errors = sum(f.severity == "error" for found in spec_findings.values() for f in found)
    if spec:
        document["spec"] = {
            "name": spec,
            "ok": not spec_errors,
            "files": [{"path": file, "findings": [f.to_dict() for f in found]} for file, found in spec_findings.items()],
        }
    if as_json:
        emit_json(document)
    else:
        for skill in skills:
            if not warnings[id(skill)]:
                stderr.print("[green]ok[/] " + escape(f"{skill.name} ({skill.path})"))
            for warning in warnings[id(skill)]:
                stderr.print("[yellow]warning[/] " + escape(f"{skill.path}: {warning}"))
        for error in errors:
            stderr.print(f"[red]error[/] {error}" + (f" [dim]({error.hint})[/]" if error.hint else ""))
        for hit in limits:
            stderr.print(f"[yellow]limit[/] {hit.message}")
        for notice in misplaced:
            stderr.print(f"[yellow]warning[/] {escape(str(notice))}")
        for checked_file, file_findings in spec_findings.items():
            if not file_findings:
                stderr.print("[green]spec ok[/] " + escape(checked_file))
            for finding in file_findings:
                colour = "red" if finding.severity == "error" else "yellow"
                stderr.print(f"[{colour}]spec {finding.severity}[/] " + escape(f"{checked_file}: {finding}"))
        stderr.print(f"{len(skills)} skills, {document['warning_count']} warnings, {len(errors)} errors")
        if spec:
            failing = sum(any(f.severity == "error" for f in found) for found in spec_findings.values())
            stderr.print(f"{spec}: {len(spec_findings) - failing} of {len(spec_findings)} files pass, {spec_errors} errors")
    if errors or spec_errors:
        raise typer.Exit(EXIT_FAILURE)


def _spec_findings(paths: list[Path]) -> dict[str, tuple[Any, ...]]:
    """The Agent Skills spec's findings on each file, by path (a file that cannot be read has one)."""
    from pincer.skills.agentskills import SpecFinding, check_spec
    from pincer.skills.parser import MAX_SKILL_FILE_BYTES as limit  # the frontmatter is at the top

    found: dict[str, tuple[Any, ...]] = {}
    for path in dict.fromkeys(paths):
        try:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError as exc:
            found[str(path)] = (SpecFinding(rule="frontmatter", message=f"cannot read the file: {exc.strerror}"),)
            continue
        found[str(path)] = check_spec(data[:limit], folder=path.parent.name)
    return found


@app.command("render")
def render(
    name: str,
    param: list[str] = typer.Option(None, "--param", "-p", help="KEY=VALUE for a declared parameter (repeatable)."),
    arguments: str | None = typer.Option(None, "--arguments", help="Free-text arguments ($ARGUMENTS)."),
    as_json: bool = JsonOption,
) -> None:
    """Render a skill's instructions with its parameters (validated, coerced, defaults applied)."""
    from pincer.skills.params import parse_param_pairs

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
        passed_over = library.passed_over(message)
    if as_json:
        unoffered = [{**item.to_dict(), "why_not": why} for item, why in passed_over]
        emit_json({"message": message, "selected": [c.to_dict() for c in chosen], "not_offered": unoffered})
        return
    if not chosen:
        stderr.print("no skill matches")
    for item in chosen:
        sys.stdout.write(f"{item.skill.name}\t{item.score}\t{', '.join(item.reasons)}\n")
    for item, why in passed_over:
        stderr.print(escape(f"{item.skill.name} would match (score {item.score}) but is not offered: {why}"))


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
            result = await pincer.install_skill_deps(name)  # refused while [skills] is off
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
        actor = str(cli_actor())
        if writable is not None and not read_origin(writable.base_dir):
            entry = approvals.approve_trust(writable, by=actor)
            what = f"approved {name} ({writable.path}) as trusted; a change to it needs approving again"
            approved = "trusted"
        else:
            origin = read_origin(winner.base_dir)
            if not origin:
                raise UsageError(
                    f"skill {name!r} is neither in the workspace nor written by a run nor fetched from an MCP server; "
                    "there is nothing to approve",
                    hint="`pincer skills show " + name + "`",
                )
            pending = tuple(winner.metadata.get("pincer/pendingTools", ())) or winner.tools
            entry = approvals.approve(winner, pending, by=actor)
            what = f"approved allowed-tools of {name}: {' '.join(pending) or '(none)'}"
            approved = "allowed_tools"
        record_act(pincer_home(), ActKind.SKILL, subject=name, outcome="approved", reason=what,
                   args={"approved": approved, **entry})  # fmt: skip
    if as_json:
        emit_json({"ok": True, "name": name, **entry})
        return
    stderr.print(what)


def _pull_token(token: str | None, token_secret: str | None, token_stdin: bool) -> str | None:
    """The bearer token for ``pull``: from the secret store or stdin, never from argv."""
    if token is not None:
        raise UsageError(
            "--token puts the token on the command line, where other users' `ps` and the shell history see it",
            hint="store it with `pincer secrets set NAME` and pass --token-secret NAME, or pipe it in with --token-stdin",
        )
    if token_secret and token_stdin:
        raise UsageError("--token-secret and --token-stdin both name a token", hint="pass one of them")
    if token_stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise UsageError("--token-stdin read no token from stdin", hint="pipe it in: `pincer skills pull URL --token-stdin < token.txt`")
        return value
    if token_secret:
        from pincer.cli.common import secret_key
        from pincer.secrets.store import SecretStore

        home = pincer_home()
        store = SecretStore.open(home, key=secret_key(home))
        try:
            return store.get(token_secret)
        finally:
            store.close()
    return None


def _shown_url(url: str) -> str:
    """The server's address without what a URL may carry besides (user, password, query)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


@app.command("pull")
def pull(
    url: str = typer.Argument(..., help="The MCP server's streamable HTTP URL, e.g. http://127.0.0.1:8765/mcp"),
    token_secret: str | None = typer.Option(None, "--token-secret", help="The secret (`pincer secrets set NAME`) holding the server's bearer token."),
    token_stdin: bool = typer.Option(False, "--token-stdin", help="Read the bearer token from stdin."),
    token: str | None = typer.Option(None, "--token", hidden=True),
    name: list[str] = typer.Option(None, "--name", help="Only these skills (repeatable)."),
    as_json: bool = JsonOption,
) -> None:
    """Fetch skills from an MCP server (skills extension), verify every file against its digest,
    install them under $PINCER_HOME/installed/skills and record them in pincer.lock (so
    `pincer verify` and every skills command see an edit). Their allowed-tools wait for `pincer skills approve`."""
    with _guard(as_json):
        bearer = _pull_token(token, token_secret, token_stdin)

    async def body() -> dict[str, Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from pincer.hub.pulled import lock_pulled_skill
        from pincer.skills.remote import fetch_remote_skills

        home = pincer_home()
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            async with httpx2.AsyncClient(headers=headers, trust_env=False, timeout=60.0) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="auto") as client:
                    installed, refused = await fetch_remote_skills(client, server=url, home=home, names=tuple(name or ()))
        except PincerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the transport and SDK raise many kinds (HTTP, MCPError, groups)
            raise SkillError(f"cannot fetch skills from {url}: {type(exc).__name__}: {exc}", source=url,
                             hint="check the URL and --token-secret") from None  # fmt: skip
        for item in installed:
            lock_pulled_skill(home, item.name, server=url, version=item.version, folder=item.path)
            record_act(home, ActKind.HUB, subject=f"skills/{item.name}", outcome="pulled",
                       reason=f"skill {item.name}@{item.version} pulled from an MCP server",
                       args={"version": item.version, "server": _shown_url(url)})  # fmt: skip
        return {"installed": [i.to_dict() for i in installed], "refused": refused}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": not result["refused"], **result})
    else:
        for item in result["installed"]:
            stderr.print(escape(f"installed {item['name']} ({item['files']} files) into {item['path']}, recorded in pincer.lock"))
        for reason in result["refused"]:
            stderr.print("[red]refused[/] " + escape(reason))
    if result["refused"]:
        raise typer.Exit(EXIT_FAILURE)
