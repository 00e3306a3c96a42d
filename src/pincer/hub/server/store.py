"""The hub server's state: one SQLite file (``hub.db``) and a folder of archives (``blobs/``)
under the hub's home.

Publishers own the items they published first (``kind/name``, and every look-alike of the name:
case and ``-``/``_``/``.`` do not make another name): only they publish new versions, move tags
and yank. A publisher token is stored as its sha256 only. A version is immutable: the
archive is unpacked and checked against its signed manifest at publish, repacked
deterministically (same content, same bytes, same sha256) and kept as ``blobs/<sha256>.tar.gz``.
Yanked versions stay downloadable by exact version (for lockfiles that pin them) and are hidden
from ``latest`` and from search. All SQL of the server is here.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import (
    ArtifactNotFound,
    Denied,
    IntegrityMismatch,
    ManifestError,
    ScanBlocked,
    StoreError,
    Unauthorized,
    UsageError,
    VersionExists,
)
from pincer.hub.archive import ArchiveLimits, PackedFile, pack, unpack
from pincer.hub.artifact import ArtifactKey, ArtifactKind, ArtifactManifest, check_name, is_version, parse_version
from pincer.hub.index import SearchIndex
from pincer.hub.scanner import scan_path
from pincer.hub.sources import CatalogEntry
from pincer.store.open_lock import open_lock

__all__ = ["HubStore", "Publication", "HUB_DB", "TOKEN_PREFIX", "fold_name", "hash_token"]

HUB_DB = "hub.db"
BLOBS = "blobs"
TOKEN_PREFIX = "phub_"
_INDEX_SOURCE = "hub"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS publishers (name TEXT PRIMARY KEY, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    sha256 TEXT PRIMARY KEY, publisher TEXT NOT NULL REFERENCES publishers (name), created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    kind TEXT NOT NULL, name TEXT NOT NULL, publisher TEXT NOT NULL, created_at REAL NOT NULL,
    stars INTEGER NOT NULL DEFAULT 0, downloads INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kind, name)
);
CREATE TABLE IF NOT EXISTS versions (
    kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL, fingerprint TEXT NOT NULL,
    manifest TEXT NOT NULL, signature TEXT NOT NULL, public_key TEXT NOT NULL, sha256 TEXT NOT NULL,
    size INTEGER NOT NULL, yanked INTEGER NOT NULL DEFAULT 0, published_at REAL NOT NULL,
    verdict TEXT NOT NULL, findings TEXT NOT NULL, forced INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, name, version)
);
CREATE TABLE IF NOT EXISTS dist_tags (
    kind TEXT NOT NULL, name TEXT NOT NULL, tag TEXT NOT NULL, version TEXT NOT NULL, PRIMARY KEY (kind, name, tag)
);
CREATE TABLE IF NOT EXISTS stars (kind TEXT NOT NULL, name TEXT NOT NULL, who TEXT NOT NULL, PRIMARY KEY (kind, name, who));
"""


def fold_name(name: str) -> str:
    """A name as look-alikes share it: case folded, ``-``, ``_`` and ``.`` dropped (npm's rule
    for new package names), so ``Code_Review`` and ``code-review`` are one name to own."""
    return "".join(c for c in name.lower() if c not in "-_.")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Publication:
    key: ArtifactKey
    version: str
    fingerprint: str
    sha256: str
    size: int
    verdict: str
    findings: tuple[dict[str, Any], ...]
    latest: str | None
    forced: bool = False  # published past high-severity findings with --force


class HubStore:
    """Thread-safe (one connection behind a lock: the app's endpoints run on worker threads)."""

    def __init__(self, home: Path, *, limits: ArchiveLimits | None = None) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.home / BLOBS).mkdir(exist_ok=True, mode=0o700)
        self.limits = limits or ArchiveLimits()
        try:
            self._conn = sqlite3.connect(self.home / HUB_DB, isolation_level=None, check_same_thread=False)
            with open_lock(self.home / HUB_DB):  # the switch to WAL and the schema, one process at a time
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA busy_timeout=5000")
                self._conn.executescript(_SCHEMA)
                # A hub home made before versions recorded a publish past high findings (--force).
                if "forced" not in {row[1] for row in self._conn.execute("PRAGMA table_info(versions)")}:
                    self._conn.execute("ALTER TABLE versions ADD COLUMN forced INTEGER NOT NULL DEFAULT 0")
                self.index = SearchIndex(self._conn)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.home / HUB_DB}: {exc}", hint="check the hub's home folder") from None
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    # -- publishers and tokens ---------------------------------------------------------------

    def new_token(self, publisher: str) -> str:
        """A new token for ``publisher`` (created if new); only its sha256 is kept."""
        check_name(publisher, source="publisher")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._tx() as conn:
            conn.execute("INSERT OR IGNORE INTO publishers (name, created_at) VALUES (?, ?)", (publisher, time.time()))
            conn.execute(
                "INSERT INTO tokens (sha256, publisher, created_at) VALUES (?, ?, ?)", (hash_token(token), publisher, time.time())
            )
        return token

    def publisher_of(self, token: str | None) -> str | None:
        if not token:
            return None
        rows = self._query("SELECT publisher FROM tokens WHERE sha256 = ?", (hash_token(token),))
        return rows[0][0] if rows else None

    def require_publisher(self, token: str | None) -> str:
        publisher = self.publisher_of(token)
        if publisher is None:
            raise Unauthorized(
                "this needs a publisher token (Authorization: Bearer phub_...)",
                hint="make one on the hub's home with `pincer hub token new --publisher NAME`",
            )
        return publisher

    # -- publishing --------------------------------------------------------------------------

    def publish(
        self, publisher: str, manifest_json: Any, signature: str, public_key: str, archive: bytes, *, force: bool = False
    ) -> Publication:
        """Unpack, check and scan a signed artifact and store it as a new version. High-severity
        scanner findings refuse it (ScanBlocked, nothing stored) unless ``force``; a version
        published so says ``forced`` wherever it is listed."""
        from pincer.hub.signing import verify_manifest

        try:
            manifest = ArtifactManifest.from_json(manifest_json, source="manifest")
        except ManifestError as exc:
            raise ManifestError(exc.message.removeprefix("manifest: "), source="manifest", hint=exc.hint) from None
        if manifest.kind is ArtifactKind.CHANNEL:
            raise UsageError("channels cannot be published here", hint="publish tools, skills, scripts, entries or bundles")
        verify_manifest(manifest, signature, public_key)
        key = manifest.key
        with self._lock:
            self._check_publishable(self._conn, key, manifest.version, publisher)  # early, before the unpack
        with tempfile.TemporaryDirectory(prefix="publish-", dir=self.home) as scratch:
            folder = Path(scratch) / "files"
            digests = unpack(archive, folder, limits=self.limits)
            listed = {f.path: f.sha256 for f in manifest.files}
            if digests != listed:
                raise IntegrityMismatch(
                    f"the archive does not hold the files the manifest lists ({len(digests)} files vs {len(listed)})",
                    hint="pack and sign the same folder: `pincer hub publish` does both",
                )
            report = scan_path(folder)
            if report.has_high and not force:
                first = report.high[0]
                raise ScanBlocked(
                    f"{key}@{manifest.version}: the hub's scanner found {len(report.high)} high-severity finding(s), "
                    f"e.g. {first.rule} at {first.file}:{first.line}: {first.message}; nothing was published",
                    findings=tuple(f.to_json() for f in report.findings),
                    hint="read them with `pincer scan PATH` and fix them, or publish anyway with "
                    "`pincer hub publish --force` (the version then says so to everyone who installs it)",
                )
            files = {
                path: PackedFile(data=(folder / path).read_bytes(), executable=bool((folder / path).stat().st_mode & 0o111))
                for path in digests
            }
        blob = pack(files)
        sha = hashlib.sha256(blob).hexdigest()
        blob_path = self.home / BLOBS / f"{sha}.tar.gz"
        if not blob_path.exists():
            temp = blob_path.with_name(f".{sha}.{secrets.token_hex(4)}.tmp")
            temp.write_bytes(blob)
            temp.replace(blob_path)
        now = time.time()
        with self._tx() as conn:
            # Again inside the transaction: a publisher racing for the same new name (or the same
            # version) passed the early check too, and the first insert decides.
            self._check_publishable(conn, key, manifest.version, publisher)
            conn.execute(
                "INSERT OR IGNORE INTO items (kind, name, publisher, created_at) VALUES (?, ?, ?, ?)",
                (key.kind.value, key.name, publisher, now),
            )
            conn.execute(
                "INSERT INTO versions (kind, name, version, fingerprint, manifest, signature, public_key, sha256, size, "
                "published_at, verdict, findings, forced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key.kind.value, key.name, manifest.version, manifest.fingerprint, json.dumps(manifest.to_json()), signature,
                 public_key, sha, len(blob), now, report.verdict, json.dumps([f.to_json() for f in report.findings]),
                 int(report.has_high)),
            )  # fmt: skip
            latest = self._latest_tag(conn, key)
            version = parse_version(manifest.version)
            if latest is None or (not version.is_prerelease and version > parse_version(latest)):
                conn.execute(
                    "INSERT INTO dist_tags (kind, name, tag, version) VALUES (?, ?, 'latest', ?) "
                    "ON CONFLICT (kind, name, tag) DO UPDATE SET version = excluded.version",
                    (key.kind.value, key.name, manifest.version),
                )
        self._reindex(key)
        return Publication(
            key=key, version=manifest.version, fingerprint=manifest.fingerprint, sha256=sha, size=len(blob),
            verdict=report.verdict, findings=tuple(f.to_json() for f in report.findings), latest=self.tags(key).get("latest"),
            forced=report.has_high,
        )  # fmt: skip

    @staticmethod
    def _check_publishable(conn: sqlite3.Connection, key: ArtifactKey, version: str, publisher: str) -> None:
        """Refuse a name another publisher owns, also spelled another way (``Owned``, ``owned_``
        for ``owned``: a look-alike a user picks by mistake), and a version that exists."""
        folded = fold_name(key.name)
        for name, owner in conn.execute("SELECT name, publisher FROM items WHERE kind = ? AND publisher != ?",
                                        (key.kind.value, publisher)).fetchall():  # fmt: skip
            if fold_name(name) == folded:
                shown = ArtifactKey(kind=key.kind, name=name)
                same = "" if name == key.name else f" ({key} differs from it only in case or in '-', '_' and '.')"
                raise Denied(f"{shown} belongs to publisher {owner!r}{same}", hint="publish under a name of your own")
        if conn.execute("SELECT 1 FROM versions WHERE kind = ? AND name = ? AND version = ?", (key.kind.value, key.name, version)).fetchone():
            raise VersionExists(f"{key}@{version} is published already; versions are immutable", hint="publish a new version")

    @staticmethod
    def _latest_tag(conn: sqlite3.Connection, key: ArtifactKey) -> str | None:
        row = conn.execute(
            "SELECT version FROM dist_tags WHERE kind = ? AND name = ? AND tag = 'latest'", (key.kind.value, key.name)
        ).fetchone()
        return row[0] if row else None

    # -- reading -----------------------------------------------------------------------------

    def item(self, key: ArtifactKey) -> dict[str, Any]:
        rows = self._query(
            "SELECT publisher, created_at, stars, downloads FROM items WHERE kind = ? AND name = ?", (key.kind.value, key.name)
        )
        if not rows:
            raise ArtifactNotFound(f"no {key} on this hub", hint="`pincer search` lists what there is")
        publisher, created, stars, downloads = rows[0]
        versions = self.versions(key)
        latest = self.tags(key).get("latest")
        manifest = self._manifest(key, latest) if latest else None
        return {
            "key": str(key), "kind": key.kind.value, "name": key.name, "publisher": publisher, "created_at": created,
            "stars": stars, "downloads": downloads, "latest": latest, "dist_tags": self.tags(key), "versions": versions,
            "display_name": manifest.display_name if manifest else "", "description": manifest.description if manifest else "",
            "keywords": list(manifest.keywords) if manifest else [], "tags": list(manifest.tags) if manifest else [],
        }  # fmt: skip

    def versions(self, key: ArtifactKey) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT version, fingerprint, yanked, published_at, verdict, forced FROM versions WHERE kind = ? AND name = ?",
            (key.kind.value, key.name),
        )
        found = [{"version": v, "fingerprint": f, "yanked": bool(y), "published_at": p, "verdict": verdict,
                  "forced": bool(forced)} for v, f, y, p, verdict, forced in rows]  # fmt: skip
        return sorted(found, key=lambda row: parse_version(row["version"]))

    def version(self, key: ArtifactKey, version: str) -> dict[str, Any]:
        rows = self._query(
            "SELECT manifest, signature, public_key, sha256, size, yanked, published_at, verdict, findings, fingerprint, "
            "forced FROM versions WHERE kind = ? AND name = ? AND version = ?",
            (key.kind.value, key.name, version),
        )
        if not rows:
            raise ArtifactNotFound(f"no {key}@{version} on this hub", hint=f"GET /api/v1/items/{key}/versions lists them")
        manifest, signature, public_key, sha, size, yanked, published, verdict, findings, fp, forced = rows[0]
        return {
            "key": str(key), "version": version, "fingerprint": fp, "manifest": json.loads(manifest), "signature": signature,
            "public_key": public_key, "sha256": sha, "size": size, "yanked": bool(yanked), "published_at": published,
            "verdict": verdict, "findings": json.loads(findings), "forced": bool(forced),
        }  # fmt: skip

    def _manifest(self, key: ArtifactKey, version: str) -> ArtifactManifest | None:
        rows = self._query("SELECT manifest FROM versions WHERE kind = ? AND name = ? AND version = ?", (key.kind.value, key.name, version))
        return ArtifactManifest.from_json(json.loads(rows[0][0])) if rows else None

    def tags(self, key: ArtifactKey) -> dict[str, str]:
        return {str(t): str(v) for t, v in self._query("SELECT tag, version FROM dist_tags WHERE kind = ? AND name = ?", (key.kind.value, key.name))}

    def download(self, key: ArtifactKey, version: str) -> bytes:
        detail = self.version(key, version)
        path = self.home / BLOBS / f"{detail['sha256']}.tar.gz"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise StoreError(f"the archive of {key}@{version} is missing from the hub's blobs", hint="republish it") from exc
        with self._tx() as conn:
            conn.execute("UPDATE items SET downloads = downloads + 1 WHERE kind = ? AND name = ?", (key.kind.value, key.name))
        self._reindex(key)
        return data

    # -- changing ----------------------------------------------------------------------------

    def _owner_check(self, key: ArtifactKey, publisher: str) -> None:
        rows = self._query("SELECT publisher FROM items WHERE kind = ? AND name = ?", (key.kind.value, key.name))
        if not rows:
            raise ArtifactNotFound(f"no {key} on this hub", hint="publish it first")
        if rows[0][0] != publisher:
            raise Denied(f"{key} belongs to publisher {rows[0][0]!r}", hint="only its publisher may change it")

    def set_tag(self, key: ArtifactKey, tag: str, version: str, publisher: str) -> dict[str, str]:
        check_name(tag, source="tag")
        if is_version(tag):
            raise UsageError(f"a tag may not look like a version ({tag})", hint="use a word: latest, stable, beta")
        self._owner_check(key, publisher)
        detail = self.version(key, version)
        if detail["yanked"]:
            raise UsageError(f"{key}@{version} is yanked; a tag cannot point at it", hint="tag another version")
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO dist_tags (kind, name, tag, version) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (kind, name, tag) DO UPDATE SET version = excluded.version",
                (key.kind.value, key.name, tag, version),
            )
        self._reindex(key)
        return self.tags(key)

    def yank(self, key: ArtifactKey, version: str, publisher: str) -> dict[str, Any]:
        self._owner_check(key, publisher)
        self.version(key, version)
        with self._tx() as conn:
            conn.execute("UPDATE versions SET yanked = 1 WHERE kind = ? AND name = ? AND version = ?", (key.kind.value, key.name, version))
            # Tags that pointed at it move to the newest release left (or go).
            live = [row[0] for row in conn.execute(
                "SELECT version FROM versions WHERE kind = ? AND name = ? AND yanked = 0", (key.kind.value, key.name))]  # fmt: skip
            best = max((parse_version(v) for v in live if not parse_version(v).is_prerelease), default=None)
            for (tag,) in conn.execute(
                "SELECT tag FROM dist_tags WHERE kind = ? AND name = ? AND version = ?", (key.kind.value, key.name, version)
            ).fetchall():
                if tag == "latest" and best is not None:
                    conn.execute("UPDATE dist_tags SET version = ? WHERE kind = ? AND name = ? AND tag = ?",
                                 (str(best), key.kind.value, key.name, tag))  # fmt: skip
                else:
                    conn.execute("DELETE FROM dist_tags WHERE kind = ? AND name = ? AND tag = ?", (key.kind.value, key.name, tag))
        self._reindex(key)
        return {"key": str(key), "version": version, "yanked": True, "dist_tags": self.tags(key)}

    def star(self, key: ArtifactKey, who: str) -> int:
        self.item(key)
        with self._tx() as conn:
            added = conn.execute("INSERT OR IGNORE INTO stars (kind, name, who) VALUES (?, ?, ?)", (key.kind.value, key.name, who)).rowcount
            if added:
                conn.execute("UPDATE items SET stars = stars + 1 WHERE kind = ? AND name = ?", (key.kind.value, key.name))
        self._reindex(key)
        return int(self._query("SELECT stars FROM items WHERE kind = ? AND name = ?", (key.kind.value, key.name))[0][0])

    # -- search ------------------------------------------------------------------------------

    def _reindex(self, key: ArtifactKey) -> None:
        with self._lock:
            try:
                item = self.item(key)
            except ArtifactNotFound:
                self.index.remove(_INDEX_SOURCE, key.kind, key.name)
                return
            latest = item["latest"]
            if latest is None:
                self.index.remove(_INDEX_SOURCE, key.kind, key.name)
                return
            detail = self.version(key, latest)
            self.index.upsert(
                CatalogEntry(
                    kind=key.kind, name=key.name, version=latest, source=_INDEX_SOURCE,
                    display_name=item["display_name"], description=item["description"], keywords=tuple(item["keywords"]),
                    tags=tuple(item["tags"]), signer=detail["public_key"], publisher=item["publisher"],
                    verdict=detail["verdict"], stars=item["stars"], downloads=item["downloads"],
                )
            )

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[dict[str, Any]]:
        with self._lock:
            found = self.index.search(query, kind=kind, limit=limit)
        out = []
        for entry in found:
            row = entry.to_json()
            row["public_key"] = row.pop("signer")
            out.append(row)
        return out
