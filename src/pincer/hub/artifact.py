"""What an artifact is: its kind, its ``kind/name`` key, its semver version, its fingerprint and
the manifest a publisher signs.

    key = parse_key("tools/github")            # ArtifactKey(kind=TOOL, name="github")
    fingerprint({"github.wasm": "ab12...", "github.capabilities.json": "cd34..."})

An artifact's fingerprint is the SHA-256 over its sorted ``path:sha256`` lines (one per file,
each ending in a newline), so it names the content and nothing else (not the archive's bytes,
times or order). Versions are semver 2.0.0; a version once published never changes.

Only the standard library is imported here: ``integrity`` uses this module at every start.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import total_ordering
from typing import Any

from pincer.core.errors import AmbiguousKey, ManifestError, UsageError

__all__ = [
    "ArtifactKind",
    "ArtifactKey",
    "Version",
    "FileEntry",
    "ArtifactManifest",
    "parse_key",
    "parse_version",
    "parse_spec",
    "fingerprint",
    "check_name",
    "KEY_PREFIXES",
    "INSTALLABLE",
]


class ArtifactKind(StrEnum):
    TOOL = "tool"  # a WASM component and its capabilities file
    SKILL = "skill"  # a folder with a SKILL.md
    MCP_SERVER = "mcp_server"  # an MCP server entry
    OPENAPI = "openapi"  # an OpenAPI document and its service entry
    SCRIPT = "script"  # a script tool manifest
    BUNDLE = "bundle"  # a list of other artifacts
    CHANNEL = "channel"  # IronClaw channels: listed in the catalog, not run by pincer

    @property
    def prefix(self) -> str:
        return KEY_PREFIXES[self]


# The first part of a key, as IronClaw's _bundles.json writes it ("tools/github").
KEY_PREFIXES: dict[ArtifactKind, str] = {
    ArtifactKind.TOOL: "tools",
    ArtifactKind.SKILL: "skills",
    ArtifactKind.MCP_SERVER: "mcp-servers",
    ArtifactKind.OPENAPI: "openapi",
    ArtifactKind.SCRIPT: "scripts",
    ArtifactKind.BUNDLE: "bundles",
    ArtifactKind.CHANNEL: "channels",
}
_BY_PREFIX = {prefix: kind for kind, prefix in KEY_PREFIXES.items()}
# Other spellings people use for the first part of a key or for --kind.
_ALIASES = {"tool": ArtifactKind.TOOL, "skill": ArtifactKind.SKILL, "mcp_server": ArtifactKind.MCP_SERVER,
            "mcp-server": ArtifactKind.MCP_SERVER, "mcp": ArtifactKind.MCP_SERVER, "script": ArtifactKind.SCRIPT,
            "bundle": ArtifactKind.BUNDLE, "channel": ArtifactKind.CHANNEL}  # fmt: skip
INSTALLABLE = frozenset(set(ArtifactKind) - {ArtifactKind.CHANNEL})

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def kind_of(text: str) -> ArtifactKind:
    """A kind from its name, its key prefix or an alias (``tools``, ``tool``, ``mcp-servers``)."""
    lowered = text.strip().lower()
    found = _BY_PREFIX.get(lowered) or _ALIASES.get(lowered)
    if found is None:
        try:
            return ArtifactKind(lowered)
        except ValueError:
            known = ", ".join(KEY_PREFIXES.values())
            raise UsageError(f"unknown artifact kind {text!r}", hint=f"use one of: {known}") from None
    return found


def check_name(name: object, *, source: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UsageError(
            f"{source}: {name!r} is not an artifact name",
            hint="use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit",
        )
    return name


@dataclass(frozen=True, kw_only=True, slots=True, order=True)
class ArtifactKey:
    kind: ArtifactKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.prefix}/{self.name}"


def parse_key(text: str, *, kinds: Mapping[str, set[ArtifactKind]] | None = None) -> ArtifactKey:
    """``kind/name`` -> ArtifactKey. A bare name is looked up in ``kinds`` (name -> the kinds the
    catalog has it as): one kind answers it, several are refused with the candidates listed."""
    text = text.strip()
    prefix, slash, name = text.partition("/")
    if slash:
        return ArtifactKey(kind=kind_of(prefix), name=check_name(name, source=text))
    check_name(text)
    found = sorted((kinds or {}).get(text, set()))
    if not found:
        raise UsageError(
            f"{text!r} is a bare name and no catalog source has it",
            hint="give the key as kind/name (for example tools/github or skills/code-review); "
            "`pincer search NAME` shows what the sources have",
        )
    if len(found) > 1:
        candidates = ", ".join(str(ArtifactKey(kind=k, name=text)) for k in found)
        raise AmbiguousKey(f"{text!r} names several artifacts: {candidates}", hint=f"say which one, e.g. {found[0].prefix}/{text}")
    return ArtifactKey(kind=found[0], name=text)


def parse_spec(text: str) -> tuple[str, str | None]:
    """``KEY[@VERSION|@TAG]`` -> (key text, version or tag or None)."""
    key, at, wanted = text.strip().partition("@")
    if at and not wanted:
        raise UsageError(f"{text!r} ends in '@' without a version or tag", hint="write KEY@1.2.3 or KEY@latest")
    return key, (wanted or None)


# --------------------------------------------------------------------------------- semver

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


@total_ordering
@dataclass(frozen=True, kw_only=True, slots=True)
class Version:
    """A semver 2.0.0 version; ordered by precedence (build metadata does not count)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: str = ""

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + self.build
        return text

    def _key(self) -> tuple[Any, ...]:
        # A release ranks above its prereleases; numeric identifiers below alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)


def parse_version(text: object, *, source: str = "version") -> Version:
    if not isinstance(text, str) or len(text) > 128:
        raise UsageError(f"{source}: {text!r} is not a semver version", hint="write MAJOR.MINOR.PATCH, e.g. 1.2.3")
    match = _SEMVER.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"{source}: {text!r} is not a semver version", hint="write MAJOR.MINOR.PATCH, e.g. 1.2.3")
    major, minor, patch, pre, build = match.groups()
    return Version(
        major=int(major), minor=int(minor), patch=int(patch), prerelease=tuple(pre.split(".")) if pre else (), build=build or ""
    )


def is_version(text: str) -> bool:
    return _SEMVER.fullmatch(text.strip()) is not None


# --------------------------------------------------------------------------------- content


def fingerprint(files: Mapping[str, str]) -> str:
    """``sha256:`` + the SHA-256 over the sorted ``path:sha256`` lines of ``files`` (path -> hex)."""
    lines = "".join(f"{path}:{digest}\n" for path, digest in sorted(files.items()))
    return "sha256:" + hashlib.sha256(lines.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class FileEntry:
    path: str
    sha256: str
    size: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactManifest:
    """What a publisher signs: the artifact's identity and every file it holds."""

    kind: ArtifactKind
    name: str
    version: str
    fingerprint: str
    files: tuple[FileEntry, ...]
    description: str = ""
    display_name: str = ""
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    capabilities: Mapping[str, Any] = field(default_factory=dict)  # what the artifact asks for, as shown

    @property
    def key(self) -> ArtifactKey:
        return ArtifactKey(kind=self.kind, name=self.name)

    def signed_bytes(self) -> bytes:
        """The bytes a signature covers: canonical JSON of fingerprint, name, version, kind, files."""
        body = {
            "fingerprint": self.fingerprint,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
            "kind": self.kind.value,
            "name": self.name,
            "version": self.version,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "name": self.name,
            "version": self.version,
            "fingerprint": self.fingerprint,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
            "description": self.description,
            "display_name": self.display_name,
            "keywords": list(self.keywords),
            "tags": list(self.tags),
            "capabilities": dict(self.capabilities),
        }

    @classmethod
    def from_json(cls, data: object, *, source: str = "manifest") -> ArtifactManifest:
        """Parse untrusted JSON; every problem is a ManifestError naming the key. The fingerprint
        must be the one its file list makes."""
        if not isinstance(data, Mapping):
            raise ManifestError("expected a JSON object", source=source)
        try:
            kind = ArtifactKind(str(data.get("kind")))
        except ValueError:
            raise ManifestError(f"unknown kind {data.get('kind')!r}", source=source, key="kind") from None
        try:
            name = check_name(data.get("name"), source=source)
            parse_version(data.get("version"), source=source)
        except UsageError as exc:
            raise ManifestError(exc.message, source=source, key="name/version") from None
        raw_files = data.get("files")
        if not isinstance(raw_files, list) or not raw_files or len(raw_files) > 100_000:
            raise ManifestError("files must be a non-empty list", source=source, key="files")
        files = []
        for index, item in enumerate(raw_files):
            if not isinstance(item, Mapping):
                raise ManifestError("each file is an object", source=source, key=f"files.{index}")
            path, digest, size = item.get("path"), item.get("sha256"), item.get("size")
            if not isinstance(path, str) or not path or not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ManifestError("each file needs a path and a sha256 (64 hex digits)", source=source, key=f"files.{index}")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ManifestError("each file needs a size in bytes", source=source, key=f"files.{index}.size")
            files.append(FileEntry(path=path, sha256=digest, size=size))
        if len({f.path for f in files}) != len(files):
            raise ManifestError("a path is listed twice", source=source, key="files")
        claimed = data.get("fingerprint")
        computed = fingerprint({f.path: f.sha256 for f in files})
        if claimed != computed:
            raise ManifestError(
                f"the fingerprint {claimed!r} is not the one its files make ({computed})", source=source, key="fingerprint"
            )
        return cls(
            kind=kind,
            name=name,
            version=str(data["version"]).strip(),
            fingerprint=computed,
            files=tuple(sorted(files, key=lambda f: f.path)),
            description=_text(data.get("description"), 4000),
            display_name=_text(data.get("display_name"), 200),
            keywords=_words(data.get("keywords")),
            tags=_words(data.get("tags")),
            capabilities=data["capabilities"] if isinstance(data.get("capabilities"), Mapping) else {},
        )


def _text(value: object, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _words(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v)[:64] for v in value[:64] if isinstance(v, str) and v.strip())
