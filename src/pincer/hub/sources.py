"""Catalog sources: what they list (:class:`CatalogEntry`) and what an install needs of them
(:class:`Resolved`: a version with its archive, entry or members, and its signature if any).

Three kinds of source, configured as ``[[hub.sources]]`` in config.toml:

- ``path`` to an IronClaw-layout registry folder (``tools/*.json``, ``mcp-servers/*.json``,
  ``channels/*.json``, ``_bundles.json``): :mod:`pincer.hub.ironclaw`;
- ``path`` to MCP-Registry ``server.json`` documents (a file, or a folder of them):
  :mod:`pincer.hub.mcp_registry`;
- ``url`` of a pincer hub server: :mod:`pincer.hub.remote`.

A folder source's entries are indexed locally (:mod:`pincer.hub.index`); a hub server ranks
its own and the catalog merges the results by score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pincer.config import HubSettings
from pincer.hub.artifact import ArtifactKey, ArtifactKind, ArtifactManifest

__all__ = ["CatalogEntry", "Resolved", "Source", "Progress", "Fetched", "DOWNLOAD_TIMEOUT_S"]

DOWNLOAD_TIMEOUT_S = HubSettings().download_timeout_s  # [hub] download_timeout_s's default

# (bytes so far, total or None): download progress for the CLI's bar.
Progress = Callable[[int, int | None], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class CatalogEntry:
    """One artifact as a catalog lists it (its newest visible version)."""

    kind: ArtifactKind
    name: str
    version: str
    source: str
    display_name: str = ""
    description: str = ""
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    signer: str = ""  # the public key that signed it ("" unsigned); the catalog names trusted ones
    publisher: str = ""
    verdict: str = "unscanned"  # clean | low | medium | high | unscanned
    stars: int | None = None
    downloads: int | None = None
    hidden: bool = False
    score: float = 0.0

    @property
    def key(self) -> ArtifactKey:
        return ArtifactKey(kind=self.kind, name=self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": str(self.key),
            "kind": self.kind.value,
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "display_name": self.display_name,
            "description": self.description,
            "keywords": list(self.keywords),
            "tags": list(self.tags),
            "signer": self.signer,
            "publisher": self.publisher,
            "verdict": self.verdict,
            "stars": self.stars,
            "downloads": self.downloads,
            "score": round(self.score, 3),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolved:
    """One version of one artifact, ready to fetch: exactly one of ``archive_url`` (a ``.tar.gz``
    with the artifact's files), ``files`` (entries carried inline: the entry file itself) or
    ``members`` (a bundle) says what it is."""

    key: ArtifactKey
    version: str
    source: str
    archive_url: str | None = None
    archive_sha256: str | None = None  # mandatory with archive_url: checked before unpacking
    archive_size: int | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)
    members: tuple[str, ...] = ()
    manifest: ArtifactManifest | None = None  # hub artifacts: what the publisher signed
    signature: str | None = None
    public_key: str | None = None
    publisher: str = ""
    yanked: bool = False
    description: str = ""
    requested: Mapping[str, Any] = field(default_factory=dict)  # capabilities shown before install
    verdict: str = "unscanned"  # a hub server's own scan of this version
    findings: tuple[Mapping[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.key}@{self.version}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Fetched:
    data: bytes
    url: str


class Source(Protocol):
    name: str

    def entries(self) -> list[CatalogEntry]:
        """Everything a local source lists (for the index); a hub server returns []."""
        ...

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[CatalogEntry] | None:
        """A server's own ranked results; None for a source the local index searches."""
        ...

    def versions(self, key: ArtifactKey) -> list[str]:
        ...

    def resolve(self, key: ArtifactKey, wanted: str | None) -> Resolved:
        """``wanted`` is a version, a tag (``latest``) or None (the newest visible version)."""
        ...

    def fetch(self, resolved: Resolved, *, max_bytes: int, progress: Progress | None = None, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
        """The archive bytes of ``resolved`` (at most ``max_bytes``, within ``timeout_s``)."""
        ...


def describe_capabilities(raw: Any) -> dict[str, Any]:
    """What a capabilities file asks for, in the few words an approval shows: hosts it may
    reach, secrets it may use, workspace prefixes, tools it may call."""
    if not isinstance(raw, Mapping):
        return {}
    wrapped = raw.get("capabilities")
    inner: Mapping[str, Any] = wrapped if isinstance(wrapped, Mapping) else {}
    data = {**inner, **{k: v for k, v in raw.items() if k != "capabilities"}}
    shown: dict[str, Any] = {}
    http = data.get("http")
    if isinstance(http, Mapping):
        hosts = []
        for item in http.get("allowlist", []) or []:
            if isinstance(item, Mapping) and isinstance(item.get("host"), str):
                methods = item.get("methods")
                hosts.append(item["host"] + (f" ({', '.join(map(str, methods))})" if isinstance(methods, list) and methods else ""))
        shown["http_hosts"] = hosts
        creds = http.get("credentials")
        if isinstance(creds, Mapping):
            shown["credentials"] = sorted(
                str(c.get("secret_name")) for c in creds.values() if isinstance(c, Mapping) and c.get("secret_name")
            )
    secrets = data.get("secrets")
    if isinstance(secrets, Mapping) and isinstance(secrets.get("allowed_names"), list):
        shown["secrets"] = [str(s) for s in secrets["allowed_names"]]
    workspace = data.get("workspace")
    if isinstance(workspace, Mapping) and isinstance(workspace.get("allowed_prefixes"), list):
        shown["workspace"] = [str(s) for s in workspace["allowed_prefixes"]]
    invoke = data.get("tool_invoke")
    if isinstance(invoke, Mapping) and isinstance(invoke.get("aliases"), Mapping):
        shown["tools"] = sorted(str(v) for v in invoke["aliases"].values())
    return shown
