"""Where installed artifacts live under ``$PINCER_HOME`` (standard library only).

Every version an install unpacks is kept, immutable, in the artifact store::

    hub/artifacts/<kind prefix>/<name>/<version>@<fingerprint 12>-<nonce>/
        files/...        the artifact's files, exactly as its fingerprint covers them
        meta.json        the manifest, signature, signer, source, and (entries) the entry written

and made *active* by one rename: a relative symlink at the place the runtime reads, swapped
atomically (a new link beside it, ``rename`` over the old)::

    tool        tools/wasm/<name>.wasm          -> .../files/<name>.wasm (its capabilities beside it)
    skill       installed/skills/<name>         -> .../files
    script      tools/script/<name>.<toml|json> -> .../files/<name>.<toml|json>
    mcp_server  an entry of mcp/servers.json    (written atomically: one rename)
    openapi     an entry of openapi/services.json

The previous version stays in the store for ``pincer rollback``; older ones are pruned.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pincer.hub.artifact import KEY_PREFIXES, ArtifactKey, ArtifactKind

__all__ = [
    "artifacts_dir",
    "versions_dir",
    "active_path",
    "read_meta",
    "version_dirs",
    "entry_digest",
    "read_entry",
    "META_FILE",
    "FILES_DIR",
    "SCRIPT_SUFFIXES",
    "hash_folder",
    "file_sha256",
    "CHUNK_BYTES",
]

META_FILE = "meta.json"
FILES_DIR = "files"
SCRIPT_SUFFIXES = (".toml", ".json")
CHUNK_BYTES = 1024 * 1024
_ENTRY_FILES = {ArtifactKind.MCP_SERVER: (Path("mcp") / "servers.json", "servers"),
                ArtifactKind.OPENAPI: (Path("openapi") / "services.json", "services")}  # fmt: skip


def artifacts_dir(home: Path) -> Path:
    return Path(home) / "hub" / "artifacts"


def versions_dir(home: Path, key: ArtifactKey) -> Path:
    return artifacts_dir(home) / KEY_PREFIXES[key.kind] / key.name


def active_path(home: Path, key: ArtifactKey) -> Path | None:
    """The link (or file, or folder) a runtime reads for ``key``; None for entry kinds and bundles."""
    home = Path(home)
    if key.kind is ArtifactKind.TOOL:
        return home / "tools" / "wasm" / f"{key.name}.wasm"
    if key.kind is ArtifactKind.SKILL:
        return home / "installed" / "skills" / key.name
    if key.kind is ArtifactKind.SCRIPT:
        folder = home / "tools" / "script"
        for suffix in SCRIPT_SUFFIXES:
            candidate = folder / f"{key.name}{suffix}"
            if os.path.lexists(candidate):
                return candidate
        return folder / f"{key.name}.toml"
    return None


def version_dirs(home: Path, key: ArtifactKey) -> list[Path]:
    """The stored versions of ``key`` (complete ones: with their meta.json), oldest first."""
    folder = versions_dir(home, key)
    try:
        found = [p for p in folder.iterdir() if not p.name.startswith(".") and (p / META_FILE).is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: (p / META_FILE).stat().st_mtime_ns)


def read_meta(version_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((version_dir / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def entry_file(home: Path, kind: ArtifactKind) -> tuple[Path, str] | None:
    found = _ENTRY_FILES.get(kind)
    return (Path(home) / found[0], found[1]) if found else None


def read_entry(home: Path, kind: ArtifactKind, name: str) -> dict[str, Any] | None:
    """An MCP server's or OpenAPI service's entry as its file holds it, or None."""
    where = entry_file(home, kind)
    if where is None:
        return None
    path, list_key = where
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    items = data.get(list_key) if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def entry_digest(entry: Any) -> str:
    """The sha256 of an entry's canonical JSON: what ``verify`` compares for entry kinds."""
    text = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def hash_folder(folder: Path) -> dict[str, str]:
    """path -> sha256 of every file under ``folder`` (hidden ones too): the input of an
    artifact's fingerprint. A symlink inside is hashed as ``symlink:TARGET``, so a file swapped
    for a link changes the fingerprint."""
    digests: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        names = sorted(filenames) + sorted(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))
        for filename in names:
            full = os.path.join(dirpath, filename)
            rel = Path(full).relative_to(folder).as_posix()
            if os.path.islink(full):
                digests[rel] = hashlib.sha256(b"symlink:" + os.readlink(full).encode()).hexdigest()
                continue
            digests[rel] = file_sha256(Path(full))
    return digests


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
