"""Turning a folder or file into a publishable artifact: its files, manifest and archive.

``pincer hub publish PATH`` finds out what PATH is (``--kind`` says it when it cannot):

- a folder with a ``SKILL.md``: a skill (its frontmatter's name, description and version);
- a ``.wasm`` (with ``NAME.capabilities.json`` beside it), an IronClaw ``.tar.gz``, or a folder
  holding one ``.wasm``: a tool, packed as ``NAME.wasm`` + ``NAME.capabilities.json``;
- a script tool manifest (``.toml``, or ``.json`` with a ``command``): a script;
- a JSON MCP server entry (``"kind": "mcp_server"``, ``mcpServers``, or a ``server.json``): an
  mcp_server;
- a folder with an OpenAPI document (and an optional ``service.json``): openapi;
- a ``bundle.json`` (``{"members": ["tools/a", "skills/b"]}``): a bundle.

A folder may hold ``pincer-artifact.toml`` (``kind``, ``name``, ``version``, ``description``,
``display_name``, ``keywords``, ``tags``); it describes the artifact and is not part of it.
Command-line flags win over it. The archive is deterministic (:func:`pincer.hub.archive.pack`).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import ManifestError, UsageError
from pincer.hub.archive import ArchiveLimits, PackedFile, pack, read_folder
from pincer.hub.artifact import (
    ArtifactKind,
    ArtifactManifest,
    FileEntry,
    check_name,
    fingerprint,
    kind_of,
    parse_version,
)
from pincer.hub.sources import describe_capabilities

__all__ = ["Built", "build_artifact", "METADATA_FILE"]

METADATA_FILE = "pincer-artifact.toml"


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    manifest: ArtifactManifest
    archive: bytes


def _metadata(path: Path) -> dict[str, Any]:
    file = path / METADATA_FILE if path.is_dir() else path.with_name(METADATA_FILE)
    if not file.is_file():
        return {}
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"cannot read it: {exc}", source=str(file)) from None
    return data


def _detect(path: Path) -> ArtifactKind:
    from pincer.skills.roots import skill_file

    if path.is_dir():
        if skill_file(path) is not None:
            return ArtifactKind.SKILL
        if (path / "bundle.json").is_file():
            return ArtifactKind.BUNDLE
        if list(path.glob("*.wasm")):
            return ArtifactKind.TOOL
        if any(p.suffix in (".yaml", ".yml", ".json") and _is_openapi(p) for p in path.iterdir() if p.is_file()):
            return ArtifactKind.OPENAPI
        raise UsageError(f"cannot tell what {path} holds", hint="pass --kind (skill, tool, script, mcp_server, openapi, bundle)")
    if path.suffix == ".wasm" or path.name.endswith((".tar.gz", ".tgz")):
        return ArtifactKind.TOOL
    if path.name == "bundle.json":
        return ArtifactKind.BUNDLE
    if path.suffix == ".toml":
        return ArtifactKind.SCRIPT
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path} is not JSON: {exc}") from None
        if isinstance(data, dict) and (data.get("kind") == "mcp_server" or "mcpServers" in data or "packages" in data or "remotes" in data):
            return ArtifactKind.MCP_SERVER
        if isinstance(data, dict) and "command" in data:
            return ArtifactKind.SCRIPT
    raise UsageError(f"cannot tell what {path} is", hint="pass --kind (skill, tool, script, mcp_server, openapi, bundle)")


def _is_openapi(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False
    return '"openapi"' in head or head.lstrip().startswith("openapi:") or "\nopenapi:" in head


def _tool_files(path: Path, name: str | None, limits: ArchiveLimits) -> tuple[str, dict[str, PackedFile]]:
    from pincer.runtimes.wasm import read_source

    if path.is_dir():
        wasm = sorted(path.glob("*.wasm"))
        if len(wasm) != 1:
            raise UsageError(f"{path} holds {len(wasm)} .wasm files; a tool is one", hint="publish the .wasm file itself")
        path = wasm[0]
    source = read_source(path, name=name)
    files = {f"{source.name}.wasm": PackedFile(data=source.wasm)}
    if source.capabilities is not None:
        files[f"{source.name}.capabilities.json"] = PackedFile(data=source.capabilities)
    return source.name, files


def build_artifact(
    path: Path,
    *,
    kind: str | None = None,
    name: str | None = None,
    version: str | None = None,
    description: str | None = None,
    keywords: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    limits: ArchiveLimits | None = None,
) -> Built:
    """Read ``path`` into a manifest and its deterministic archive (nothing is signed here)."""
    limits = limits or ArchiveLimits()
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist", hint="give the folder or file to publish")
    meta = _metadata(path)
    chosen = kind_of(kind or meta.get("kind") or _detect(path).value)
    display_name = str(meta.get("display_name") or "")
    found_description = description or str(meta.get("description") or "")
    found_version = version or (str(meta["version"]) if "version" in meta else None)
    requested: dict[str, Any] = {}
    if chosen is ArtifactKind.TOOL:
        artifact_name, files = _tool_files(path, name or meta.get("name"), limits)
        caps = files.get(f"{artifact_name}.capabilities.json")
        if caps is not None:
            try:
                raw = json.loads(caps.data)
                requested = describe_capabilities(raw)
                found_description = found_description or str(raw.get("description") or "")
                found_version = found_version or (str(raw["version"]) if isinstance(raw, dict) and "version" in raw else None)
            except ValueError:
                pass
    elif chosen is ArtifactKind.SKILL:
        if not path.is_dir():
            raise UsageError(f"a skill is a folder with a SKILL.md; {path} is a file", hint="publish the skill's folder")
        files = read_folder(path, limits=limits)
        files.pop(METADATA_FILE, None)
        from pincer.skills.parser import parse_skill

        own = files.get("SKILL.md") or files.get("skill.md")
        if own is None:
            raise UsageError(f"{path} holds no SKILL.md", hint="publish the skill's folder")
        skill = parse_skill(own.data, path=Path(name or path.name) / "SKILL.md")
        artifact_name = name or meta.get("name") or skill.name
        found_description = found_description or skill.description
        found_version = found_version or skill.version
        requested = {"tools": list(skill.tools)} if skill.tools else {}
        tags = tags or tuple(skill.tags)
    else:
        if path.is_dir():
            files = read_folder(path, limits=limits)
            files.pop(METADATA_FILE, None)
        else:
            files = {path.name: PackedFile(data=path.read_bytes())}
        artifact_name = name or meta.get("name") or (path.stem if path.is_file() else path.name)
        if chosen is ArtifactKind.BUNDLE:
            try:
                members = json.loads(next(f for n, f in files.items() if n.endswith("bundle.json")).data)["members"]
            except (StopIteration, ValueError, KeyError, TypeError):
                raise ManifestError("expected {\"members\": [\"kind/name\", ...]}", source=str(path)) from None
            files = {"bundle.json": PackedFile(data=(json.dumps({"members": members}, indent=2) + "\n").encode())}
            requested = {"members": list(members)}
            if path.name == "bundle.json" and not name and not meta.get("name"):
                artifact_name = path.parent.name
        elif chosen is ArtifactKind.MCP_SERVER and path.is_file():
            files = {"mcp-server.json": files[path.name]}
        elif chosen is ArtifactKind.SCRIPT and path.is_file():
            files = {f"{artifact_name}{path.suffix}": files[path.name]}
    check_name(artifact_name, source="name")
    if not found_version:
        raise UsageError(f"{path} says no version", hint=f"pass --version 1.0.0, or set version in {METADATA_FILE}")
    parse_version(found_version, source="version")
    return _built(
        kind=chosen, name=str(artifact_name), version=found_version, files=files, description=found_description,
        display_name=display_name, keywords=tuple(keywords) or tuple(str(k) for k in meta.get("keywords", [])),
        tags=tuple(tags) or tuple(str(t) for t in meta.get("tags", [])), requested=requested,
    )  # fmt: skip


def _built(
    *, kind: ArtifactKind, name: str, version: str, files: Mapping[str, PackedFile], description: str, display_name: str,
    keywords: tuple[str, ...], tags: tuple[str, ...], requested: dict[str, Any],
) -> Built:  # fmt: skip
    entries = tuple(
        FileEntry(path=p, sha256=hashlib.sha256(f.data).hexdigest(), size=len(f.data)) for p, f in sorted(files.items())
    )
    manifest = ArtifactManifest(
        kind=kind, name=name, version=version, fingerprint=fingerprint({e.path: e.sha256 for e in entries}), files=entries,
        description=description[:4000], display_name=display_name, keywords=keywords, tags=tags, capabilities=requested,
    )  # fmt: skip
    return Built(manifest=manifest, archive=pack(dict(files)))
