"""Every configured source searched together, and keys resolved against them.

    catalog = Catalog.from_config(config, secrets=store)
    catalog.search("github", kind=None, limit=20)      # ranked, merged from every source
    source, resolved = catalog.resolve("tools/github", "0.2.5")

A bare name (``github``) resolves when one kind answers to it across the sources; several
kinds are refused with the candidates listed. The same key in two sources needs ``--source``
unless the sources agree on nothing else: the first configured source that has it wins, and
``--source`` picks another. The local index of folder sources is refreshed when their files
change.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pincer.core.errors import AmbiguousKey, ArtifactNotFound, ConfigError, HubUnavailable, PincerError, UsageError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, parse_key
from pincer.hub.index import SearchIndex, open_index
from pincer.hub.sources import CatalogEntry, Resolved, Source

logger = logging.getLogger(__name__)

__all__ = ["Catalog", "SourceSettings", "make_source", "INDEX_FILE"]

INDEX_FILE = Path("hub") / "index.db"


class SourceSettings:
    """One ``[[hub.sources]]`` table as the catalog needs it."""

    def __init__(self, *, name: str, path: Path | None = None, url: str | None = None, token_secret: str | None = None,
                 format: str = "auto") -> None:  # fmt: skip
        self.name = name
        self.path = path
        self.url = url
        self.token_secret = token_secret
        self.format = format


def make_source(settings: Any, *, secrets: Any = None) -> Source:
    """A source from a ``[[hub.sources]]`` table (config's HubSource, or SourceSettings)."""
    from pincer.hub.ironclaw import IronClawSource, is_ironclaw_registry
    from pincer.hub.mcp_registry import McpRegistrySource

    if settings.url is not None:
        from pincer.hub.remote import RemoteSource

        token = None
        if settings.token_secret and secrets is not None:
            token = secrets.find(settings.token_secret)
        return RemoteSource(settings.name, settings.url, token=token)
    path = Path(settings.path) if settings.path is not None else None  # config's HubSource holds a str
    if path is None:
        raise ConfigError(f"hub source {settings.name!r} has neither path nor url", hint="set hub.sources.path or hub.sources.url")
    fmt = settings.format
    if fmt == "auto":
        fmt = "ironclaw" if is_ironclaw_registry(path) else "mcp-registry"
    if fmt == "ironclaw":
        return IronClawSource(settings.name, path)
    return McpRegistrySource(settings.name, path)


class Catalog:
    def __init__(self, sources: Sequence[Source], *, index_path: Path | None = None) -> None:
        self.sources = list(sources)
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ConfigError("two [[hub.sources]] have the same name", hint="give every hub.sources.name its own value")
        self._index_path = index_path
        self._index: SearchIndex | None = None
        self.warnings: list[str] = []

    @classmethod
    def from_config(cls, config: Any, *, secrets: Any = None) -> Catalog:
        sources = [make_source(s, secrets=secrets) for s in config.hub.sources]
        return cls(sources, index_path=Path(config.home) / INDEX_FILE)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def source(self, name: str) -> Source:
        for source in self.sources:
            if source.name == name:
                return source
        known = ", ".join(s.name for s in self.sources) or "none"
        raise UsageError(f"no hub source named {name!r}", hint=f"configured sources: {known} ([[hub.sources]] in config.toml)")

    def _local(self) -> list[Source]:
        return [s for s in self.sources if hasattr(s, "stamp")]

    def index(self) -> SearchIndex:
        """The local index, refreshed for every folder source whose files changed."""
        if self._index is None:
            if self._index_path is None:
                import sqlite3

                self._index = SearchIndex(sqlite3.connect(":memory:", check_same_thread=False))
            else:
                self._index = open_index(self._index_path)
        index = self._index
        for source in self._local():
            try:
                stamp = json.dumps([str(getattr(source, "path", "")), source.stamp()])  # type: ignore[attr-defined]
            except OSError as exc:
                self.warnings.append(f"source {source.name}: {exc}")
                continue
            if index.stamp_of(source.name) != stamp:
                index.replace_source(source.name, source.entries(), stamp=stamp)
            self.warnings.extend(getattr(source, "problems", []))
        return index

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, *, kind: ArtifactKind | None = None, limit: int = 20,
               source: str | None = None) -> list[CatalogEntry]:  # fmt: skip
        """Ranked results of every source (or one), merged by score."""
        if source is not None:
            self.source(source)
        results: list[CatalogEntry] = []
        local_names = [s.name for s in self._local() if source in (None, s.name)]
        if local_names:
            results.extend(self.index().search(query, kind=kind, limit=limit, sources=local_names))
        for remote in self.sources:
            if remote.name in local_names or source not in (None, remote.name):
                continue
            try:
                found = remote.search(query, kind=kind, limit=limit)
            except PincerError as exc:
                self.warnings.append(f"source {remote.name}: {exc.message}")
                continue
            results.extend(found or [])
        order = {s.name: i for i, s in enumerate(self.sources)}
        results.sort(key=lambda e: (-e.score, order.get(e.source, 99), e.name))
        return results[:limit]

    # -- resolution ------------------------------------------------------------------------

    def parse(self, text: str, *, source: str | None = None) -> ArtifactKey:
        """A key from ``kind/name`` or a bare name the catalog knows under one kind."""
        if "/" in text:
            return parse_key(text)
        return parse_key(text, kinds=self.kinds_by_name(text, source=source))

    def kinds_by_name(self, name: str, *, source: str | None = None) -> dict[str, set[ArtifactKind]]:
        kinds: dict[str, set[ArtifactKind]] = {}
        local = [s.name for s in self._local() if source in (None, s.name)]
        if local:
            found = self.index().kinds_by_name(local).get(name)
            if found:
                kinds.setdefault(name, set()).update(found)
        for remote in self.sources:
            if remote.name in local or source not in (None, remote.name):
                continue
            try:
                for entry in remote.search(name, kind=None, limit=50) or []:
                    if entry.name == name:
                        kinds.setdefault(name, set()).add(entry.kind)
            except PincerError as exc:
                self.warnings.append(f"source {remote.name}: {exc.message}")
        return kinds

    def resolve(self, key: ArtifactKey, wanted: str | None, *, source: str | None = None,
                allow_yanked: bool = False) -> tuple[Source, Resolved]:  # fmt: skip
        """The first source (in config order, or ``source``) that has ``key`` at ``wanted``."""
        candidates = [self.source(source)] if source is not None else self.sources
        if not candidates:
            raise UsageError("no hub sources are configured", hint="add a [[hub.sources]] table to config.toml (hub.sources.path or hub.sources.url)")
        misses: list[str] = []
        for candidate in candidates:
            try:
                if allow_yanked and hasattr(candidate, "item"):
                    resolved = candidate.resolve(key, wanted, allow_yanked=True)  # type: ignore[call-arg]
                else:
                    resolved = candidate.resolve(key, wanted)
                return candidate, resolved
            except ArtifactNotFound as exc:
                misses.append(exc.message)
            except HubUnavailable as exc:
                misses.append(exc.message)
        if len(misses) == 1:
            raise ArtifactNotFound(misses[0], hint=f"`pincer search {key.name}` shows what the sources have")
        raise ArtifactNotFound(
            f"no source has {key}{'@' + wanted if wanted else ''}: " + "; ".join(misses),
            hint=f"`pincer search {key.name}` shows what the sources have",
        )

    def sources_with(self, key: ArtifactKey) -> list[str]:
        found = []
        for source in self.sources:
            try:
                if source.versions(key):
                    found.append(source.name)
            except PincerError:
                continue
        return found

    def check_unambiguous(self, key: ArtifactKey, source: str | None) -> None:
        """Refuse a key two sources have when no ``--source`` says which (an install must not
        depend on the order of the config's tables by accident)."""
        if source is not None:
            return
        having = self.sources_with(key)
        if len(having) > 1:
            raise AmbiguousKey(
                f"{key} is in several sources: {', '.join(having)}",
                hint=f"say which with --source (for example --source {having[0]})",
            )


def with_signer_names(entries: list[CatalogEntry], trust: Any, *, verified: bool = False) -> list[CatalogEntry]:
    """Entries whose signer is a trusted key show that key's trust-store name: as the source's
    claim ("alice (claimed)") unless ``verified`` (the caller checked the signature), because a
    search row carries no signature and a hostile source can name any public key."""
    if trust is None:
        return entries
    keys = {k.public_key: k.name for k in trust.load()}
    out = []
    for entry in entries:
        if entry.signer:
            name = keys.get(entry.signer)
            shown = (name if verified else f"{name} (claimed)") if name else f"untrusted ({entry.signer[8:20]}…)"
            out.append(replace(entry, signer=shown))
        else:
            out.append(replace(entry, signer="unsigned"))
    return out
