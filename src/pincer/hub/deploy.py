"""Per kind: checking staged files before anything moves, and making a version active.

``prepare`` runs on the staging folder: it puts the files in the shape the kind needs (an
IronClaw tarball's ``github-tool.wasm`` becomes ``github.wasm``), checks them the way the
runtime would (a WASM component is compiled and described, a SKILL.md parsed, a script manifest
loaded, an MCP server entry read, an OpenAPI document's operations extracted) and says what the
artifact asks for. ``activate`` is the one rename that makes a stored version the one the
runtime reads; it records how to undo each change in the step's journal first
(:mod:`pincer.hub.journal`), for a step that fails later or a process that dies.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.core.errors import ArtifactRefused, ManifestError, PincerError, UsageError
from pincer.hub.artifact import ArtifactKey, ArtifactKind
from pincer.hub.journal import Journal
from pincer.hub.layout import FILES_DIR, SCRIPT_SUFFIXES, active_path, artifacts_dir, entry_digest, read_entry
from pincer.hub.scanner import Finding, scan_command
from pincer.hub.sources import describe_capabilities

__all__ = ["Prepared", "prepare", "activate", "deactivate", "drop_compile_cache", "check_activation", "is_ours"]

Step = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class Prepared:
    requested: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    entry: dict[str, Any] | None = None  # mcp_server / openapi: the entry activate writes
    entry_sha256: str | None = None
    notes: tuple[str, ...] = ()
    cache_digest: str | None = None  # tool: its compile cache entry (dropped if the install fails)
    cache_was_there: bool = True


# -------------------------------------------------------------------------------- prepare


def prepare(kind: ArtifactKind, key: ArtifactKey, files_dir: Path, *, home: Path, step: Step) -> Prepared:
    """Normalise and check the staged files of ``key``; raises the runtime's own errors."""
    if kind is ArtifactKind.TOOL:
        return _prepare_tool(key, files_dir, home=home, step=step)
    if kind is ArtifactKind.SKILL:
        return _prepare_skill(key, files_dir)
    if kind is ArtifactKind.SCRIPT:
        return _prepare_script(key, files_dir)
    if kind is ArtifactKind.MCP_SERVER:
        return _prepare_mcp(key, files_dir)
    if kind is ArtifactKind.OPENAPI:
        return _prepare_openapi(key, files_dir)
    if kind is ArtifactKind.BUNDLE:
        return Prepared()
    raise ArtifactRefused(f"{key}: pincer does not install {kind.value} artifacts", hint="channels need IronClaw")


def _only_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def normalise_tool(key: ArtifactKey, files_dir: Path) -> list[str]:
    """``NAME.wasm`` + ``NAME.capabilities.json`` at the top of ``files_dir`` (IronClaw bundles
    name them after the crate and may nest them), and a runner tool's ``NAME.py`` +
    ``NAME.built.json`` beside the wasm; other files are dropped. Returns notes."""
    files = _only_files(files_dir)
    wasm = [p for p in files if p.suffix == ".wasm"]
    if len(wasm) != 1:
        raise ArtifactRefused(
            f"{key}: the archive holds {len(wasm)} .wasm files; a tool archive holds exactly one",
            hint="pack NAME.wasm and NAME.capabilities.json",
        )
    base = wasm[0].name[: -len(".wasm")]
    caps = [p for p in files if p.name == f"{base}.capabilities.json"]
    notes = []
    staged = files_dir.parent / f".normalise-{uuid.uuid4().hex[:8]}"
    staged.mkdir()
    os.rename(wasm[0], staged / f"{key.name}.wasm")
    if caps:
        os.rename(caps[0], staged / f"{key.name}.capabilities.json")
    # A runner tool (pincer build): its source and manifest beside the shared runner component.
    for suffix in (".py", ".built.json"):
        extra = [p for p in files if p.name == f"{base}{suffix}" and p.parent == wasm[0].parent]
        if extra:
            os.rename(extra[0], staged / f"{key.name}{suffix}")
    dropped = [p.relative_to(files_dir).as_posix() for p in _only_files(files_dir)]
    if dropped:
        notes.append(f"not installed (a tool is its component and capabilities): {', '.join(dropped[:5])}")
    shutil.rmtree(files_dir)
    os.rename(staged, files_dir)
    return notes


def _prepare_tool(key: ArtifactKey, files_dir: Path, *, home: Path, step: Step) -> Prepared:
    from pincer.runtimes.wasm import SourceFiles, compile_tool, parse_capabilities, validate_name

    validate_name(key.name, origin=str(key))
    notes = normalise_tool(key, files_dir)
    wasm = (files_dir / f"{key.name}.wasm").read_bytes()
    caps_path = files_dir / f"{key.name}.capabilities.json"
    caps = caps_path.read_bytes() if caps_path.is_file() else None
    source = SourceFiles(name=key.name, wasm=wasm, capabilities=caps, origin=str(key))
    parse_capabilities(source)  # ManifestError before anything is compiled
    digest, was_there = compile_tool(home, source, wasm_path=files_dir / f"{key.name}.wasm", step=step)
    requested: dict[str, Any] = {}
    if caps is not None:
        try:
            requested = describe_capabilities(json.loads(caps))
        except ValueError:
            requested = {}
    return Prepared(requested=requested, notes=tuple(notes), cache_digest=digest, cache_was_there=was_there)


def _prepare_skill(key: ArtifactKey, files_dir: Path) -> Prepared:
    from pincer.skills.model import Trust
    from pincer.skills.parser import parse_skill
    from pincer.skills.roots import skill_file

    if skill_file(files_dir) is None:
        entries = list(files_dir.iterdir())
        if len(entries) == 1 and entries[0].is_dir() and skill_file(entries[0]) is not None:
            inner = entries[0]
            moved = files_dir.parent / f".flatten-{uuid.uuid4().hex[:8]}"
            os.rename(inner, moved)
            os.rmdir(files_dir)
            os.rename(moved, files_dir)
    top = skill_file(files_dir)
    if top is None:
        raise ArtifactRefused(f"{key}: the archive has no SKILL.md at its top", hint="pack the skill folder's contents")
    caps_file = files_dir / "capabilities.json"
    skill = parse_skill(
        top.read_bytes(),
        path=Path(key.name) / "SKILL.md",
        root="installed",
        trust=Trust.INSTALLED,
        capabilities_json=caps_file.read_bytes() if caps_file.is_file() else None,
    )
    if skill.name != key.name:
        raise ArtifactRefused(
            f"{key}: its SKILL.md names the skill {skill.name!r}", hint=f"publish it as skills/{skill.name}, or rename it"
        )
    requested: dict[str, Any] = {}
    if skill.tools:
        requested["tools"] = list(skill.tools)
    if skill.capabilities:
        requested["capabilities"] = [getattr(c, "name", str(c)) for c in skill.capabilities]
    if skill.requires.bins:
        requested["bins"] = list(skill.requires.bins)
    if skill.requires.env:
        requested["env"] = list(skill.requires.env)
    if skill.credentials:
        requested["credentials"] = [str(c.get("name", c)) for c in skill.credentials]
    return Prepared(requested=requested)


def _prepare_script(key: ArtifactKey, files_dir: Path) -> Prepared:
    from pincer.runtimes.script import load_manifest

    files = _only_files(files_dir)
    manifests = [p for p in files if p.suffix in SCRIPT_SUFFIXES and p.parent == files_dir]
    if len(files) != 1 or len(manifests) != 1:
        raise ArtifactRefused(f"{key}: a script artifact is one manifest (.toml or .json)", hint="pack only NAME.toml")
    target = files_dir / f"{key.name}{manifests[0].suffix}"
    if manifests[0] != target:
        os.rename(manifests[0], target)
    manifest = load_manifest(target)
    if manifest.name != key.name:
        raise ArtifactRefused(f"{key}: the manifest names the tool {manifest.name!r}", hint=f"publish it as scripts/{manifest.name}")
    requested = {"command": list(getattr(manifest, "command", ()) or ())}
    return Prepared(requested=requested)


def _prepare_mcp(key: ArtifactKey, files_dir: Path) -> Prepared:
    from pincer.hub.mcp_registry import entry_from_document, is_server_document
    from pincer.runtimes.mcp import import_data

    files = [p for p in _only_files(files_dir) if p.suffix == ".json"]
    if len(files) != 1:
        raise ArtifactRefused(f"{key}: an MCP server artifact is one JSON entry", hint="pack mcp-server.json")
    try:
        data = json.loads(files[0].read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"not a JSON entry: {exc}", source=str(key)) from None
    if is_server_document(data):
        data = entry_from_document(data, name=key.name)
    result = import_data(data, source=str(key), base=files_dir)
    if result.services or len(result.servers) != 1:
        raise ArtifactRefused(f"{key}: the entry describes {len(result.servers)} MCP servers; an artifact is one")
    if result.secrets:
        raise ArtifactRefused(
            f"{key}: the entry carries literal credentials ({', '.join(sorted(result.secrets))})",
            hint="a published entry names secrets as ${secret:NAME}; never ship a token",
        )
    config = result.servers[0]
    if config.name != key.name:
        config = config.with_changes(name=key.name)
    entry = config.to_json()
    findings = scan_command(config.command, config.args, dict(config.env), file=f"{key} (command)")
    for name, value in config.headers.items():
        from pincer.hub.scanner import scan_text

        findings.extend(scan_text(f"{name}: {value}", file=f"{key} (header {name})"))
    requested = {k: entry[k] for k in ("command", "args", "url", "env", "headers") if entry.get(k)}
    return Prepared(requested=requested, findings=tuple(findings), entry=entry, entry_sha256=entry_digest(entry),
                    notes=tuple(result.notes))  # fmt: skip


def _prepare_openapi(key: ArtifactKey, files_dir: Path) -> Prepared:
    from pincer.runtimes.openapi import Resolver, load_document, read_service, server_urls

    settings: dict[str, Any] = {}
    service_file = files_dir / "service.json"
    if service_file.is_file():
        try:
            settings = json.loads(service_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ManifestError(f"service.json is not JSON: {exc}", source=str(key)) from None
        if not isinstance(settings, dict):
            raise ManifestError("service.json must be an object", source=str(key))
    documents = [p for p in _only_files(files_dir) if p.name != "service.json" and p.suffix in (".json", ".yaml", ".yml")]
    if len(documents) != 1:
        raise ArtifactRefused(f"{key}: an OpenAPI artifact is one document (+ service.json)", hint="pack openapi.yaml")
    document, location = load_document(documents[0])
    auth = settings.get("auth") if isinstance(settings.get("auth"), str) else None
    base = settings.get("base_url") if isinstance(settings.get("base_url"), str) else next(iter(server_urls(document, location)), None)
    if base is None:
        raise ManifestError("the document names no server and service.json no base_url", source=str(key))
    service = read_service(
        key.name, document, location, base_url=base, resolver=Resolver(document, location, fetch=None),
        spec=f"hub:{key}", auth=auth, keep_servers=not isinstance(settings.get("base_url"), str),
        auth_secret=settings.get("auth_secret") if isinstance(settings.get("auth_secret"), str) else None,
    ).service
    entry = service.to_json()
    return Prepared(requested={"base_url": base, "operations": len(service.operations)}, entry=entry, entry_sha256=entry_digest(entry))


# -------------------------------------------------------------------------------- activate


def is_ours(home: Path, path: Path) -> bool:
    """Whether ``path`` is a link into the artifact store (so an update may replace it)."""
    if not os.path.islink(path):
        return False
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(artifacts_dir(home)))


def _swap_link(link: Path, target: Path, *, force: bool, home: Path, key: ArtifactKey, journal: Journal) -> None:
    """Point ``link`` at ``target`` with one rename; the journal can put back what was there."""
    journal.removes_new_dirs(link.parent)
    link.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    previous: str | None = os.readlink(link) if os.path.islink(link) else None
    if os.path.lexists(link) and previous is None:
        if not force:
            raise UsageError(
                f"{link} exists and was not installed from the hub",
                hint=f"remove it first (`pincer tools remove {key.name}`), or pass --force to replace it",
            )
        # Kept until the step is done: a rollback puts it back, the commit deletes it.
        _put_aside(link, journal)
    elif previous is not None and not is_ours(home, link) and not force:
        raise UsageError(f"{link} is a link pincer did not make", hint="pass --force to replace it")
    temp = link.with_name(f".{link.name}.{uuid.uuid4().hex[:8]}.link")
    journal.removes(temp)
    os.symlink(os.path.relpath(target, link.parent), temp)
    if previous is not None:
        journal.restores_link(link, previous)
    elif not os.path.lexists(link):
        journal.removes(link)
    os.replace(temp, link)


def _put_aside(path: Path, journal: Journal) -> None:
    aside = path.with_name(f".{path.name}.replaced-{uuid.uuid4().hex[:8]}")
    journal.moves_back(aside, path)
    os.rename(path, aside)


def activate(home: Path, key: ArtifactKey, version_dir: Path, prepared: Prepared, *, force: bool, ours: bool, journal: Journal) -> None:
    """Make ``version_dir`` the active version of ``key``. ``ours``: the lock lists ``key`` (what
    is there may be replaced without --force). Every change is recorded in ``journal`` first;
    files it displaces are put aside (restored by a rollback, deleted when the step commits)."""
    files = version_dir / FILES_DIR
    if key.kind is ArtifactKind.TOOL:
        link = active_path(home, key)
        assert link is not None
        _swap_link(link, files / f"{key.name}.wasm", force=force or ours, home=home, key=key, journal=journal)
        stale = link.with_name(f"{key.name}.capabilities.json")  # a manual install's, now shadowed
        if stale.is_file():
            _put_aside(stale, journal)
    elif key.kind is ArtifactKind.SKILL:
        link = active_path(home, key)
        assert link is not None
        _swap_link(link, files, force=force or ours, home=home, key=key, journal=journal)
    elif key.kind is ArtifactKind.SCRIPT:
        manifest = next(p for p in files.iterdir() if p.suffix in SCRIPT_SUFFIXES)
        link = home / "tools" / "script" / manifest.name
        others = [home / "tools" / "script" / f"{key.name}{s}" for s in SCRIPT_SUFFIXES if s != manifest.suffix]
        if any(os.path.lexists(o) for o in others) and not (force or ours):
            raise UsageError(f"a script tool named {key.name!r} is installed already", hint=f"`pincer tools remove {key.name}` first, or --force")
        _swap_link(link, manifest, force=force or ours, home=home, key=key, journal=journal)
        for other in others:
            if os.path.lexists(other):
                _put_aside(other, journal)
    elif key.kind in (ArtifactKind.MCP_SERVER, ArtifactKind.OPENAPI):
        _write_entry(home, key, prepared, force=force or ours, journal=journal)


def check_activation(home: Path, key: ArtifactKey, *, force: bool, ours: bool) -> None:
    """Refuse, before anything moves, to replace what the hub did not install (unless --force)."""
    if force or ours:
        return
    if key.kind in (ArtifactKind.TOOL, ArtifactKind.SKILL, ArtifactKind.SCRIPT):
        folder = home / "tools" / "script"
        paths = [folder / f"{key.name}{s}" for s in SCRIPT_SUFFIXES] if key.kind is ArtifactKind.SCRIPT else [active_path(home, key)]
        for path in paths:
            if path is not None and os.path.lexists(path) and not is_ours(home, path):
                raise UsageError(
                    f"{path} exists and was not installed from the hub",
                    hint=f"remove it first (`pincer tools remove {key.name}`), or pass --force to replace it",
                )
    elif key.kind in (ArtifactKind.MCP_SERVER, ArtifactKind.OPENAPI) and read_entry(home, key.kind, key.name) is not None:
        what = "an MCP server" if key.kind is ArtifactKind.MCP_SERVER else "an OpenAPI service"
        raise UsageError(
            f"{what} named {key.name!r} is configured already (not from the hub)",
            hint="remove it first (`pincer mcp remove NAME` / `pincer openapi remove NAME`), or pass --force",
        )


def _snapshot(path: Path, journal: Journal) -> None:
    """Record how to restore ``path`` (and its ``.lock`` sidecar and folder) as they are now."""
    journal.removes_new_dirs(path.parent)
    lock = path.with_name(path.name + ".lock")
    if not lock.exists():
        journal.removes(lock)
    journal.restores_file(path)


def _write_entry(home: Path, key: ArtifactKey, prepared: Prepared, *, force: bool, journal: Journal) -> None:
    assert prepared.entry is not None
    if not force:
        check_activation(home, key, force=False, ours=False)
    if key.kind is ArtifactKind.MCP_SERVER:
        from pincer.runtimes.mcp import ServerStore, parse_servers

        store = ServerStore(home)
        config = parse_servers({"schema_version": 1, "servers": [prepared.entry]}, source=str(key))[0]
        _snapshot(store.path, journal)
        store.add(config, replace_existing=True)
        return
    from pincer.runtimes.openapi import ServiceConfig, ServiceStore

    services = ServiceStore(home)
    service = ServiceConfig.from_json(prepared.entry)
    _snapshot(services.path, journal)
    services.add(service, replace_existing=True)


def deactivate(home: Path, key: ArtifactKey, journal: Journal) -> None:
    """Take ``key`` out of the runtime's sight (one unlink / one entry removed), recorded first."""
    if key.kind in (ArtifactKind.TOOL, ArtifactKind.SKILL, ArtifactKind.SCRIPT):
        link = active_path(home, key)
        if link is None or not os.path.lexists(link):
            return
        if not os.path.islink(link):
            raise UsageError(f"{link} is not a link pincer made; it is left in place", hint="remove it by hand if it must go")
        journal.restores_link(link, os.readlink(link))
        os.unlink(link)
        return
    if key.kind in (ArtifactKind.MCP_SERVER, ArtifactKind.OPENAPI):
        if read_entry(home, key.kind, key.name) is None:
            return
        if key.kind is ArtifactKind.MCP_SERVER:
            from pincer.runtimes.mcp import ServerStore

            store = ServerStore(home)
            _snapshot(store.path, journal)
            store.remove(key.name)
            return
        from pincer.runtimes.openapi import ServiceStore

        services = ServiceStore(home)
        _snapshot(services.path, journal)
        services.remove(key.name)


def drop_compile_cache(home: Path, prepared: Prepared) -> None:
    if prepared.cache_digest is None or prepared.cache_was_there:
        return
    try:
        from pincer.runtimes.wasm import drop_compiled

        drop_compiled(home, prepared.cache_digest)
    except PincerError:
        pass
