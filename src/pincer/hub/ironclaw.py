"""An IronClaw-layout registry folder as a catalog source, read as it is.

    registry/tools/*.json          {"name", "display_name", "kind": "tool", "version", "description",
                                    "keywords", "tags", "hidden", "artifacts": {"wasm32-wasip2":
                                    {"url", "sha256"}}, "auth_summary": {"secrets": [...]}, ...}
    registry/mcp-servers/*.json    {"name", "kind": "mcp_server", "url" | "command", "auth", ...}
    registry/channels/*.json       like tools, kind "channel" (listed; pincer runs no channels)
    registry/_bundles.json         {"bundles": {NAME: {"display_name", "description", "aliases",
                                    "extensions": ["tools/gmail", ...]}}}

Unknown keys are ignored. A tool's archive is IronClaw's ``NAME.tar.gz`` (``NAME.wasm`` and
``NAME.capabilities.json``); its ``sha256`` is mandatory and checked before anything is
unpacked. An MCP server entry is its own artifact: the entry file is what gets installed (and
fingerprinted). Registry entries carry no signatures: installing one needs ``--allow-unsigned``.
A file that cannot be read is skipped and named in :attr:`IronClawSource.problems`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pincer.core.errors import ArtifactNotFound, ArtifactRefused, PincerError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, check_name, is_version
from pincer.hub.download import download
from pincer.hub.sources import DOWNLOAD_TIMEOUT_S, CatalogEntry, Progress, Resolved

logger = logging.getLogger(__name__)

__all__ = ["IronClawSource", "is_ironclaw_registry", "MAX_ENTRY_BYTES"]

MAX_ENTRY_BYTES = 1024 * 1024
_FOLDERS = {"tools": ArtifactKind.TOOL, "mcp-servers": ArtifactKind.MCP_SERVER, "channels": ArtifactKind.CHANNEL}
_TARGET = "wasm32-wasip2"
_NO_VERSION = "0.0.0"  # IronClaw's MCP server entries and bundles carry none


def is_ironclaw_registry(path: Path) -> bool:
    return path.is_dir() and (any((path / f).is_dir() for f in _FOLDERS) or (path / "_bundles.json").is_file())


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value if isinstance(v, str)) if isinstance(value, list) else ()


class IronClawSource:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = Path(path)
        self.problems: list[str] = []
        self._raw: dict[ArtifactKey, tuple[dict[str, Any], bytes, Path]] | None = None
        self._raw_stamp: tuple[Any, ...] | None = None

    def _load(self) -> dict[ArtifactKey, tuple[dict[str, Any], bytes, Path]]:
        """The entries, read again when the folder's files changed (a long-lived catalog sees
        a registry update)."""
        try:
            stamp = self.stamp()
        except OSError:
            stamp = None
        if self._raw is not None and stamp == self._raw_stamp:
            return self._raw
        self._raw_stamp = stamp
        found: dict[ArtifactKey, tuple[dict[str, Any], bytes, Path]] = {}
        self.problems = []
        for folder, kind in _FOLDERS.items():
            for file in sorted((self.path / folder).glob("*.json")):
                try:
                    raw = file.read_bytes()[: MAX_ENTRY_BYTES + 1]
                    if len(raw) > MAX_ENTRY_BYTES:
                        raise ValueError(f"larger than {MAX_ENTRY_BYTES:,} bytes")
                    data = json.loads(raw)
                    if not isinstance(data, dict):
                        raise ValueError("not a JSON object")
                    name = check_name(data.get("name") or file.stem, source=str(file))
                except (OSError, ValueError, PincerError) as exc:
                    self.problems.append(f"{file}: {exc}")
                    continue
                found[ArtifactKey(kind=kind, name=name)] = (data, raw, file)
        bundles = self.path / "_bundles.json"
        if bundles.is_file():
            try:
                data = json.loads(bundles.read_text(encoding="utf-8"))
                for name, bundle in (data.get("bundles") or {}).items():
                    if isinstance(bundle, dict):
                        check_name(name, source=str(bundles))
                        found[ArtifactKey(kind=ArtifactKind.BUNDLE, name=name)] = (bundle, b"", bundles)
            except (OSError, ValueError, AttributeError, PincerError) as exc:
                self.problems.append(f"{bundles}: {exc}")
        for problem in self.problems:
            logger.warning("hub source %s: skipped %s", self.name, problem)
        self._raw = found
        return found

    def stamp(self) -> tuple[Any, ...]:
        parts: list[Any] = []
        for folder in _FOLDERS:
            for file in sorted((self.path / folder).glob("*.json")):
                info = file.stat()
                parts.append((file.name, info.st_size, info.st_mtime_ns))
        bundles = self.path / "_bundles.json"
        if bundles.is_file():
            info = bundles.stat()
            parts.append((bundles.name, info.st_size, info.st_mtime_ns))
        return tuple(parts)

    def entries(self) -> list[CatalogEntry]:
        out = []
        for key, (data, _raw, _file) in sorted(self._load().items()):
            raw_version = data.get("version")
            version = raw_version if isinstance(raw_version, str) and is_version(raw_version) else _NO_VERSION
            out.append(
                CatalogEntry(
                    kind=key.kind,
                    name=key.name,
                    version=version,
                    source=self.name,
                    display_name=str(data.get("display_name") or ""),
                    description=str(data.get("description") or ""),
                    keywords=_strings(data.get("keywords")),
                    tags=_strings(data.get("tags")),
                    aliases=_strings(data.get("aliases")),
                    hidden=data.get("hidden") is True,
                    verdict=_entry_verdict(key, data),
                )
            )
        return out

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[CatalogEntry] | None:
        return None

    def versions(self, key: ArtifactKey) -> list[str]:
        entry = self._load().get(key)
        if entry is None:
            return []
        version = entry[0].get("version")
        return [version if isinstance(version, str) and is_version(version) else _NO_VERSION]

    def resolve(self, key: ArtifactKey, wanted: str | None) -> Resolved:
        found = self._load().get(key)
        if found is None:
            raise ArtifactNotFound(f"source {self.name!r} has no {key}", hint=f"`pincer search {key.name}` shows what the sources have")
        data, raw, file = found
        version = self.versions(key)[0]
        if wanted not in (None, "latest", version):
            raise ArtifactNotFound(
                f"source {self.name!r} has {key} only at version {version}, not {wanted}",
                hint=f"install {key}@{version}, or {key} for the newest",
            )
        description = str(data.get("description") or "")
        if key.kind is ArtifactKind.TOOL:
            artifact = (data.get("artifacts") or {}).get(_TARGET) if isinstance(data.get("artifacts"), dict) else None
            if not isinstance(artifact, dict) or not isinstance(artifact.get("url"), str):
                raise ArtifactRefused(f"{file}: the entry has no artifacts.{_TARGET}.url", hint="the registry entry is incomplete")
            sha = artifact.get("sha256")
            if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha.lower()):
                raise ArtifactRefused(
                    f"{file}: artifacts.{_TARGET}.sha256 is missing or malformed; it is mandatory and nothing is installed without it",
                    hint="ask the registry's owner for the archive's sha256",
                )
            secrets = _strings((data.get("auth_summary") or {}).get("secrets")) if isinstance(data.get("auth_summary"), dict) else ()
            return Resolved(
                key=key, version=version, source=self.name, archive_url=artifact["url"], archive_sha256=sha.lower(),
                description=description, requested={"secrets": list(secrets)} if secrets else {},
            )  # fmt: skip
        if key.kind is ArtifactKind.MCP_SERVER:
            return Resolved(key=key, version=version, source=self.name, files={"mcp-server.json": raw}, description=description,
                            requested=_server_requested(data))  # fmt: skip
        if key.kind is ArtifactKind.BUNDLE:
            return Resolved(key=key, version=version, source=self.name, members=_strings(data.get("extensions")),
                            description=description)  # fmt: skip
        raise ArtifactRefused(
            f"{key} is an IronClaw channel; pincer lists channels but does not run them",
            hint="install the tools of the bundle instead; channels need IronClaw",
        )

    def fetch(self, resolved: Resolved, *, max_bytes: int, progress: Progress | None = None, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
        if resolved.archive_url is None:
            raise ArtifactRefused(f"{resolved.label} has no archive to fetch")
        return download(resolved.archive_url, max_bytes=max_bytes, base=self.path, progress=progress, timeout_s=timeout_s)


def _server_requested(data: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    if isinstance(data.get("url"), str):
        shown["url"] = data["url"]
    if isinstance(data.get("command"), str):
        shown["command"] = [data["command"], *_strings(data.get("args"))]
    if isinstance(data.get("auth"), str):
        shown["auth"] = data["auth"]
    return shown


def _entry_verdict(key: ArtifactKey, data: dict[str, Any]) -> str:
    """An MCP server entry is scanned when listed (its command is all there is to scan)."""
    if key.kind is not ArtifactKind.MCP_SERVER:
        return "unscanned"
    from pincer.hub.scanner import ScanReport, scan_command

    raw_env = data.get("env")
    env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    found = scan_command(
        data.get("command") if isinstance(data.get("command"), str) else None,
        _strings(data.get("args")),
        {str(k): str(v) for k, v in env.items()},
        file=f"mcp-servers/{key.name}",
    )
    return ScanReport(findings=tuple(found)).verdict
