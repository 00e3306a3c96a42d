"""The hub's everyday commands: search, install, update, outdated, remove, rollback, pin, unpin,
installed, verify, scan.

Each is a top-level command (``pincer install tools/github``). Downloads and compiles show a
progress bar on stderr in a terminal (a line per stage in a pipe, nothing with ``--json``);
``--json`` writes one document. Exit 0 success, 1 a refusal or failure, 2 a usage error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pincer.cli.common import EXIT_FAILURE, EXIT_OK, JsonOption, emit_json, fail, pincer_home, stderr
from pincer.core.errors import PincerError, UsageError

if TYPE_CHECKING:
    from pincer.hub.installer import Hub

__all__ = [
    "search",
    "install",
    "update",
    "outdated",
    "remove",
    "rollback",
    "pin",
    "unpin",
    "installed",
    "verify",
    "scan",
    "open_hub",
    "InstallProgress",
]

SourceOption = typer.Option(None, "--source", help="Only this [[hub.sources]] entry (by its name).")


class InstallProgress:
    """Downloads as a byte bar, compiles as a spinner: on a terminal, transient; in a pipe, a
    line per stage; with --json, nothing."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        self._stage: str | None = None
        self._is_terminal = enabled and stderr.is_terminal

    def __enter__(self) -> InstallProgress:
        if self._is_terminal:
            from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            from pincer.cli.common import stderr_console

            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                console=stderr_console(), transient=True,
            )
            self._progress.start()
        return self

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        label = {"download": "downloading", "compiling": "compiling (a few seconds the first time)", "checking": "checking"}.get(stage, stage)
        if self._progress is not None:
            if self._task is None or stage != self._stage:
                if self._task is not None:
                    self._progress.remove_task(self._task)
                self._task = self._progress.add_task(label, total=total if stage == "download" else None)
            self._progress.update(self._task, completed=done, total=total if stage == "download" else None)
        elif stage != self._stage:
            stderr.print(f"{label}...")
        self._stage = stage

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _audit_sink(home: Path) -> Any:
    """Records every change in the audit log, as the CLI user's act; the database opens on the
    first record, so a refused install touches nothing."""

    def record(action: str, key: str, version: str, reason: str) -> None:
        from pincer.cli.acts import cli_actor, record_entries
        from pincer.store.acts import hub_act

        record_entries(home, [hub_act(cli_actor(), action, key, version, reason)])

    return record


def open_hub(*, as_json: bool, progress: InstallProgress | None = None, secrets: Any = None) -> Hub:
    from pincer.config import load_config
    from pincer.hub.archive import ArchiveLimits
    from pincer.hub.catalog import Catalog
    from pincer.hub.installer import Hub

    home = pincer_home()
    config = load_config(home)
    hub = config.hub
    limits = ArchiveLimits(
        max_archive_bytes=hub.max_archive_bytes, max_unpacked_bytes=hub.max_unpacked_bytes, max_files=hub.max_files,
        max_file_bytes=hub.max_unpacked_bytes,
    )
    return Hub(home, catalog=Catalog.from_config(config, secrets=secrets), limits=limits, audit=_audit_sink(home),
               progress=progress, download_timeout_s=hub.download_timeout_s)


def _guard(as_json: bool, fn: Any) -> Any:
    try:
        return fn()
    except PincerError as exc:
        if not as_json:
            _print_findings(getattr(exc, "findings", ()))
        fail(exc, as_json=as_json)


def _print_findings(findings: Any) -> None:
    """A refused install's findings (a hub artifact cannot be given to `pincer scan`, which
    reads local paths: the refusal lists what it found)."""
    for finding in findings or ():
        if isinstance(finding, dict):
            where = f"{finding.get('rule')} {finding.get('file')}:{finding.get('line')}: {finding.get('message')}"
            stderr.print(f"  {_e(finding.get('severity'))} {_e(where)}")


def _e(value: object) -> str:
    """Text from a source (names, notes, messages) printed as itself, never as rich markup."""
    from rich.markup import escape

    return escape(str(value))


def _print_results(results: list[Any]) -> None:
    for result in results:
        note = f" ({'; '.join(result.notes)})" if result.notes else ""
        signer = "UNSIGNED" if result.allow_unsigned else (f"signed by {result.signer}" if result.signer else "")
        was = f" (was {result.previous})" if result.previous and result.previous != result.version else ""
        shown_signer = f" - {signer}" if signer and result.action not in ("removed", "skipped") else ""
        stderr.print(_e(f"{result.action} {result.key}@{result.version}{was}{shown_signer}{note}"))
        if result.allow_unsigned and result.action in ("installed", "updated", "reinstalled"):
            stderr.print(
                f"[bold yellow]warning:[/] {_e(result.key)} was installed without a trusted signature (--allow-unsigned); "
                "pincer.lock and the audit log record it"
            )
        for finding in result.findings:
            if finding["severity"] in ("high", "medium"):
                where = f"{finding['rule']} {finding['file']}:{finding['line']}: {finding['message']}"
                stderr.print(f"  [yellow]{_e(finding['severity'])}[/] {_e(where)}")


# ---------------------------------------------------------------------------------- search


def search(
    query: str = typer.Argument("", help="Words to look for (empty: list everything)."),
    kind: str | None = typer.Option(None, "--kind", help="Only this kind: tool, skill, mcp_server, openapi, script, bundle."),
    source: str | None = SourceOption,
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="At most this many results."),
    as_json: bool = JsonOption,
) -> None:
    """Search every hub source: IronClaw registries, hub servers, server.json documents."""
    from pincer.hub.artifact import kind_of
    from pincer.hub.catalog import with_signer_names
    from pincer.hub.trust import TrustStore

    def body() -> tuple[list[Any], list[str]]:
        hub = open_hub(as_json=as_json)
        try:
            found = hub.catalog.search(query, kind=kind_of(kind) if kind else None, limit=limit, source=source)
            return with_signer_names(found, TrustStore(hub.home)), hub.catalog.warnings
        finally:
            hub.catalog.close()

    results, warnings = _guard(as_json, body)
    if as_json:
        emit_json({"query": query, "results": [r.to_json() for r in results], "warnings": warnings})
        return
    for warning in warnings:
        stderr.print(f"[yellow]warning:[/] {_e(warning)}")
    if not results:
        stderr.print(f"nothing matches {query!r}")
        return
    from rich.table import Table

    table = Table(title=f"{len(results)} result{'s' if len(results) != 1 else ''}", title_justify="left")
    for column in ("key", "version", "kind", "signer", "scan", "stars/downloads", "source", "description"):
        table.add_column(column)
    for r in results:
        counts = "-" if r.stars is None else f"{r.stars}/{r.downloads}"
        text = r.description if len(r.description) <= 60 else r.description[:59] + "…"
        table.add_row(*(_e(cell) for cell in (r.key, r.version, r.kind.value, r.signer, r.verdict, counts, r.source, text)))
    stderr.print(table)


# ---------------------------------------------------------------------------------- install


def install(
    key: str | None = typer.Argument(None, help="KEY[@VERSION|@TAG], e.g. tools/github or skills/code-review@1.2.0. "
                                                "None: install exactly what the workspace pincer.lock lists."),
    source: str | None = SourceOption,
    force: bool = typer.Option(False, "--force", help="Install past high-severity scanner findings and over local edits."),
    allow_unsigned: bool = typer.Option(
        False, "--allow-unsigned", help="Install without a trusted signature (recorded in pincer.lock and the audit log)."
    ),
    lockfile: Path | None = typer.Option(None, "--lockfile", help="The workspace lock to install (default: ./pincer.lock or a parent's)."),
    replace: bool = typer.Option(False, "--replace", help="Let an installed skill take the name of a trusted one (bundled, yours)."),
    as_json: bool = JsonOption,
) -> None:
    """Install an artifact (tool, skill, MCP server, OpenAPI service, script, bundle), or a workspace pincer.lock."""
    from pincer.hub.installer import InstallOptions
    from pincer.hub.lockfile import find_workspace_lock

    if key is not None and lockfile is None and source in (None, "bundled"):
        _install_bundled(key, as_json, explicit=source == "bundled")  # the built-ins ship with pincer
    with InstallProgress(enabled=not as_json) as progress:

        def body() -> list[Any]:
            hub = open_hub(as_json=as_json, progress=progress)
            try:
                if key is None:
                    path = lockfile or find_workspace_lock(Path.cwd(), stop=[hub.home])
                    if path is None:
                        raise UsageError(
                            "no KEY given and no pincer.lock here or in a parent folder",
                            hint="`pincer install tools/NAME`, or run it next to a project's pincer.lock",
                        )
                    return hub.install_lock(Path(path), force=force)
                if lockfile is not None:
                    raise UsageError("give a KEY or --lockfile, not both", hint="drop one of them")
                holder = _trusted_holder(hub.home, key)
                if holder is not None and not replace:
                    raise UsageError(
                        f"the trusted skill {holder.name!r} ({holder.root}: {holder.path}) holds this name; an installed "
                        "skill of the same name would not be used in its place",
                        hint=f"pass --replace to install {key} and let it take the name (its body, its /command, its "
                        "triggers), or install a skill of another name",
                    )
                results = hub.install(key, InstallOptions(force=force, allow_unsigned=allow_unsigned, source=source))
                if holder is not None:
                    _record_replace(hub.home, holder.name)
                return results
            finally:
                hub.catalog.close()

        results = _guard(as_json, body)
    if as_json:
        emit_json({"ok": True, "results": [r.to_json() for r in results]})
    else:
        _print_results(results)
    raise typer.Exit(EXIT_OK)


def _install_bundled(key: str, as_json: bool, *, explicit: bool) -> None:
    """``tools/NAME`` of a bundled built-in: ``[builtins.NAME] enabled = true`` in config.toml,
    offline; exits. Taken with ``--source bundled``, or without ``--source`` when no [hub] source
    is configured (one that is may offer its own ``tools/github``, e.g. IronClaw's WASM build).
    Anything else returns and goes to the hub."""
    from pincer.builtins.catalog import bundle_members, bundled_key
    from pincer.config import load_config

    members = bundle_members(key.split("@", 1)[0])
    if members is not None:
        _install_bundled_set(key.split("@", 1)[0], members, as_json, explicit=explicit)
    name = bundled_key(key.split("@", 1)[0])
    if name is None:
        if explicit:
            fail(UsageError(f"{key} is not a bundled tool", hint="bundled: tools/github, tools/web_fetch, tools/web_search, tools/llm_context, bundles/google"), as_json=as_json)
        return
    if not explicit and _guard(as_json, lambda: load_config(pincer_home())).hub.sources:
        return
    import pincer
    from pincer.builtins.catalog import enable

    action = _guard(as_json, lambda: enable(pincer_home(), name))
    if as_json:
        emit_json({"ok": True, "results": [{"key": f"tools/{name}", "version": pincer.__version__, "source": "bundled",
                                            "fingerprint": "", "action": action}]})
    else:
        stderr.print(_e(f"{action} tools/{name}@{pincer.__version__} (bundled with pincer: [builtins.{name}] enabled = true)"))
    raise typer.Exit(EXIT_OK)


def _install_bundled_set(key: str, members: list[str], as_json: bool, *, explicit: bool) -> None:
    """A bundle of built-ins (``bundles/google``): each member enabled as ``tools/NAME`` is; exits."""
    from pincer.config import load_config

    if not explicit and _guard(as_json, lambda: load_config(pincer_home())).hub.sources:
        return
    import pincer
    from pincer.builtins.catalog import enable

    results = [{"key": f"tools/{name}", "version": pincer.__version__, "source": "bundled", "fingerprint": "",
                "action": _guard(as_json, lambda name=name: enable(pincer_home(), name))} for name in members]
    if as_json:
        emit_json({"ok": True, "bundle": key, "results": results})
    else:
        for row in results:
            stderr.print(_e(f"{row['action']} {row['key']}@{pincer.__version__} (bundled with pincer, {key})"))
    raise typer.Exit(EXIT_OK)


def _remove_bundled(key: str, as_json: bool) -> None:
    """``tools/NAME`` or a bundle of built-ins that ``pincer install`` enabled (not in the hub's
    lock): ``[builtins.NAME] enabled = false``; exits. Anything else returns and goes to the hub."""
    from pincer.builtins.catalog import bundle_members, bundled_key, disable

    plain = key.split("@", 1)[0]
    name = bundled_key(plain)
    members = bundle_members(plain) or ([name] if name is not None else None)
    if members is None:
        return
    results = [{"key": f"tools/{member}", "source": "bundled",
                "action": _guard(as_json, lambda member=member: disable(pincer_home(), member))} for member in members]  # fmt: skip
    if as_json:
        emit_json({"ok": True, "results": results})
    else:
        for row, member in zip(results, members, strict=True):
            if row["action"] == "removed":
                stderr.print(_e(f"removed tools/{member} (bundled with pincer: [builtins.{member}] enabled = false)"))
            else:
                stderr.print(_e(f"nothing to remove: tools/{member} is not enabled"))
    raise typer.Exit(EXIT_OK)


def _trusted_holder(home: Path, key: str) -> Any:
    """The trusted skill (not an installed one) that holds the name ``skills/NAME`` would take."""
    from pincer.config import load_config
    from pincer.skills.library import SkillLibrary
    from pincer.skills.model import Trust

    text = key.split("@", 1)[0]
    if not text.startswith("skills/"):
        return None
    name = text.split("/", 1)[1]
    library = SkillLibrary.from_config(load_config(home))
    held = [s for s in library.report.skills if s.name == name and s.trust is Trust.TRUSTED and s.root != "installed"]
    return held[0] if held else None


def _record_replace(home: Path, name: str) -> None:
    """A person said --replace: the installed skill of that name (this SKILL.md) takes it."""
    from pincer.cli.acts import cli_actor
    from pincer.config import load_config
    from pincer.skills.library import SkillLibrary

    library = SkillLibrary.from_config(load_config(home))
    candidates = [*library.report.skills, *(s.skill for s in library.report.shadowed)]
    installed = next((s for s in candidates if s.name == name and s.root == "installed"), None)
    if installed is not None and library.approvals is not None:
        library.approvals.approve_replace(installed, by=str(cli_actor()))


def update(
    key: str | None = typer.Argument(None, help="The artifact to update; with --all, every one."),
    all_: bool = typer.Option(False, "--all", help="Update everything installed (pinned ones stay)."),
    force: bool = typer.Option(False, "--force", help="Overwrite local edits and install past high-severity findings."),
    allow_unsigned: bool = typer.Option(False, "--allow-unsigned", help="Accept versions without a trusted signature (recorded)."),
    as_json: bool = JsonOption,
) -> None:
    """Update installed artifacts to the newest version their source has; the previous one is kept."""
    if (key is None) == (not all_):
        fail(UsageError("give one KEY or --all", hint="`pincer update tools/github` or `pincer update --all`"), as_json=as_json)
    with InstallProgress(enabled=not as_json) as progress:

        def body() -> list[Any]:
            hub = open_hub(as_json=as_json, progress=progress)
            try:
                return hub.update(key, force=force, allow_unsigned=allow_unsigned)
            finally:
                hub.catalog.close()

        results = _guard(as_json, body)
    if as_json:
        emit_json({"ok": True, "results": [r.to_json() for r in results]})
    else:
        _print_results(results)


def outdated(as_json: bool = JsonOption) -> None:
    """List installed artifacts whose source has a newer version."""

    def body() -> list[dict[str, Any]]:
        hub = open_hub(as_json=as_json)
        try:
            return hub.outdated()
        finally:
            hub.catalog.close()

    rows = _guard(as_json, body)
    if as_json:
        emit_json({"artifacts": rows})
        return
    newer = [r for r in rows if r["outdated"] or r.get("error")]
    if not newer:
        stderr.print(f"all {len(rows)} installed artifacts are up to date")
        return
    for row in newer:
        if row.get("error"):
            stderr.print(f"{_e(row['key'])} {_e(row['installed'])}: [yellow]{_e(row['error'])}[/]")
        else:
            stderr.print(_e(f"{row['key']} {row['installed']} -> {row['latest']}{' (pinned)' if row['pinned'] else ''}"))


def remove(key: str = typer.Argument(..., help="The artifact to remove (a bundle: with the members it installed)."),
           as_json: bool = JsonOption) -> None:
    """Remove an installed artifact; a running pincer serve drops it within a second."""
    hub = open_hub(as_json=as_json)
    if _guard(as_json, lambda: hub.lock().get(hub.key_of(key))) is None:
        _remove_bundled(key, as_json)  # `pincer install tools/browser` enabled a built-in: disable it
    results = _guard(as_json, lambda: hub.remove(key))
    if as_json:
        emit_json({"ok": True, "results": [r.to_json() for r in results]})
    else:
        _print_results(results)


def rollback(
    key: str = typer.Argument(..., help="The artifact to roll back."),
    force: bool = typer.Option(False, "--force", help="Roll back over local edits."),
    as_json: bool = JsonOption,
) -> None:
    """Go back to the version installed before the current one (kept for this)."""
    result = _guard(as_json, lambda: open_hub(as_json=as_json).rollback(key, force=force))
    if as_json:
        emit_json({"ok": True, "results": [result.to_json()]})
    else:
        _print_results([result])


def pin(key: str = typer.Argument(..., help="The artifact to keep at its version."), as_json: bool = JsonOption) -> None:
    """Keep an artifact at its version: update leaves it alone until unpin."""
    entry = _guard(as_json, lambda: open_hub(as_json=as_json).pin(key, pinned=True))
    if as_json:
        emit_json({"ok": True, "key": str(entry.key), "version": entry.version, "pinned": True})
    else:
        stderr.print(f"pinned {entry.key} at {entry.version}")


def unpin(key: str = typer.Argument(..., help="The artifact update may change again."), as_json: bool = JsonOption) -> None:
    """Let update change a pinned artifact again."""
    entry = _guard(as_json, lambda: open_hub(as_json=as_json).pin(key, pinned=False))
    if as_json:
        emit_json({"ok": True, "key": str(entry.key), "version": entry.version, "pinned": False})
    else:
        stderr.print(f"unpinned {entry.key} ({entry.version})")


def installed(as_json: bool = JsonOption) -> None:
    """List what the hub installed here (pincer.lock), each with its state on disk."""
    rows = _guard(as_json, lambda: open_hub(as_json=as_json).installed())
    if as_json:
        emit_json({"artifacts": rows})
        return
    if not rows:
        stderr.print("nothing is installed from the hub (`pincer search` shows what there is)")
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} installed", title_justify="left")
    for column in ("key", "version", "source", "signer", "pinned", "state"):
        table.add_column(column)
    for row in rows:
        signer = "UNSIGNED" if row["allow_unsigned"] else row["signer"]
        table.add_row(*(_e(c) for c in (row["key"], row["version"], row["source"], signer, "yes" if row["pinned"] else "", row["status"])))
    stderr.print(table)


def verify(
    fix: bool = typer.Option(False, "--fix", help="Reinstall each mismatch from its source, at the locked version and fingerprint."),
    as_json: bool = JsonOption,
) -> None:
    """Check installed artifacts against pincer.lock: exit 1 naming each one edited, replaced or gone."""
    with InstallProgress(enabled=not as_json and fix) as progress:

        def body() -> tuple[list[Any], list[Any], list[Any]]:
            hub = open_hub(as_json=as_json, progress=progress)
            entries, problems = hub.verify()
            fixed: list[Any] = []
            if fix and problems:
                fixed = hub.fix(problems)
                _, problems = hub.verify()
            return entries, problems, fixed

        entries, problems, fixed = _guard(as_json, body)
    if as_json:
        emit_json({"ok": not problems, "checked": len(entries), "mismatches": [m.to_json() for m in problems],
                   "fixed": [r.to_json() for r in fixed]})
    else:
        for result in fixed:
            stderr.print(_e(f"reinstalled {result.key}@{result.version}"))
        for mismatch in problems:
            stderr.print(f"[bold red]mismatch:[/] {_e(mismatch.reason)}")
        if not problems:
            stderr.print(f"{len(entries)} installed artifact{'s' if len(entries) != 1 else ''} match pincer.lock")
        else:
            stderr.print("[dim]hint: `pincer verify --fix` reinstalls them from their sources[/]")
    raise typer.Exit(EXIT_FAILURE if problems else EXIT_OK)


def scan(path: Path = typer.Argument(..., help="A skill folder, a script, any file or folder."), as_json: bool = JsonOption) -> None:
    """Run the install-time scanner on a file or folder; exit 1 when a finding is high severity."""
    from pincer.hub.scanner import scan_path

    if not os.path.exists(path):
        fail(UsageError(f"{path} does not exist", hint="give a file or folder"), as_json=as_json)
    report = scan_path(path)
    if as_json:
        emit_json({"path": str(path), **report.to_json()})
    else:
        for finding in report.findings:
            colour = {"high": "bold red", "medium": "yellow", "low": "dim"}[finding.severity.value]
            stderr.print(f"[{colour}]{finding.severity.value}[/] {_e(f'{finding.rule} {finding.file}:{finding.line}: {finding.message}')}")
            if finding.excerpt:
                stderr.print(f"    [dim]{_e(finding.excerpt)}[/]")
        stderr.print(f"{report.files} file{'s' if report.files != 1 else ''} scanned: {report.verdict}")
    raise typer.Exit(EXIT_FAILURE if report.has_high else EXIT_OK)
