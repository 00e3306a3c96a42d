"""The registry's files under PINCER_HOME, shared by the gateways of several machines.

What ``pincer tools install``/``remove``, ``pincer mcp add``/``remove``/``trust``, ``pincer
openapi add``/``remove``, the hub's installs and its lockfile write are files under PINCER_HOME,
in the *shared roots* (:data:`SHARED_ROOTS`). Without ``[store] url`` nothing changes: the
local backend (:class:`LocalHome`) shares nothing and costs nothing, and the gateways of one
home read the files themselves. With ``[store] url`` each home keeps its files and PostgreSQL
keeps a copy of each (store/pg/home_files.py: path, bytes, sha256, mode, version, deleted) with a
version counter that moves with every change:

- a **sync** (:meth:`HomeSync.sync`) compares the home with what it last synced
  (``$PINCER_HOME/shared-home.json``): what changed here is published, in one transaction; what
  others published since is materialised here, each file atomically (temp file, rename), links as
  links, deletions as unlinks, the files the runtimes reload on (pins, server and service lists,
  pincer.lock) last. The runtimes then pick the change up the way they pick up any change made on
  this home (reload.py polls the same files). A change made here and one published elsewhere to
  the same path since the last sync: the one made here wins (it is the later), except when a home
  syncs for the first time, where what is shared wins over what the home had.
- a read-modify-write of a shared JSON file (``jsonfile.locked``: the pins, the server list, the
  services) also holds a lock in the database for that path, reads the newest copy first and
  publishes the write before letting go (:func:`shared_write`), so two machines pinning at once
  never lose each other's pins, and a definition trusted on one is what the other compares with.

The CLI syncs before and after each command (cli/shared_home.py); ``pincer serve`` at start and
then whenever the counter moved or a file here changed, checked every ``HOME_SYNC_INTERVAL_S``.

A row is refused (reported, and kept in the manifest for ``pincer doctor``; the home keeps what
it had) when its bytes do not hash to its sha256, its path is not in a shared root, or it is a
link that leads out of them, or makes another link of the home lead out, as the kernel resolves
links (store/home_links.py: a chain of links that each look inside can lead out). That catches a
row changed or corrupted in the database, not a writer who changes the sha256 too: what the hub
installed is still checked against pincer.lock at every load, and its signature against this
machine's trust store (``hub/trust.json`` is not shared). Per machine, never shared: secrets and
the keys (``secret.key``, ``audit.key``), ``config.toml``, ``exec-approvals.json``, the hub's
trust store and catalog index, caches, builds and the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pincer.core.errors import StoreError
from pincer.store.home_links import LinkView
from pincer.store.jsonfile import locked, read_json, set_shared_write, write_bytes_atomic, write_json_atomic

logger = logging.getLogger(__name__)

__all__ = [
    "SHARED_ROOTS",
    "MANIFEST_FILE",
    "HOME_SYNC_INTERVAL_S",
    "MAX_SHARED_FILE_BYTES",
    "SharedFile",
    "SharedHomeBackend",
    "LocalHome",
    "SyncReport",
    "HomeSync",
    "share",
    "unshare",
    "shared_write",
    "refused_rows",
    "links_leading_out",
]

# Relative to PINCER_HOME: a folder (everything under it) or one file.
_SHARED_FOLDERS = ("tools/wasm", "tools/script", "openapi", "hub/artifacts", "installed/skills", "skills")
_SHARED_FILES = ("mcp/servers.json", "mcp/pins.json", "pincer.lock")
SHARED_ROOTS = _SHARED_FOLDERS + _SHARED_FILES
MANIFEST_FILE = "shared-home.json"
HOME_SYNC_INTERVAL_S = 0.5
MAX_SHARED_FILE_BYTES = 64 * 1024 * 1024
# Materialised last, in this order: what a runtime reloads on finds what it names in place.
_LAST = ("mcp/pins.json", "openapi/services.json", "mcp/servers.json", "pincer.lock")
# The temporary names pincer's writers use beside what they write (jsonfile, hub/deploy.py,
# hub/journal.py, skills/remote.py, script/installed.py): never shared, never materialised.
_TRANSIENT = re.compile(
    r"^\..*\.(tmp|link|partial|old)$|^\..*\.replaced-[0-9a-f]+$|^\.(normalise|flatten)-[0-9a-f]+$|\.json\.lock$"
)
_SYNC_HINT = "run `pincer db status` to check the store; the next sync (any pincer command, or a running gateway) retries"


def _is_transient(name: str) -> bool:
    return bool(_TRANSIENT.search(name))


def _in_roots(rel: str) -> bool:
    return any(rel == root or rel.startswith(root + "/") for root in SHARED_ROOTS)


def _root_of(rel: str) -> str:
    return next(root for root in SHARED_ROOTS if rel == root or rel.startswith(root + "/"))


def _target(row: SharedFile) -> str:
    """A link row's target ("" for any other row; a target that is not UTF-8 is refused first)."""
    return row.data.decode("utf-8", "replace") if row.kind == "link" else ""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedFile:
    """One shared path as the store keeps it: a file's bytes, a link's target, or a deletion."""

    path: str  # relative to PINCER_HOME, '/'-separated
    kind: str  # "file" | "link" | "gone"
    data: bytes = b""  # the file's bytes; a link's target as UTF-8
    sha256: str = ""  # of data, as recorded when it was published
    mode: int = 0o600
    version: int = 0  # the counter value it was published under (0: not yet published)

    @classmethod
    def of(cls, path: str, kind: str, data: bytes = b"", *, mode: int = 0o600) -> SharedFile:
        return cls(path=path, kind=kind, data=data, sha256=_sha256(data), mode=mode)

    @property
    def digest(self) -> str:
        """What a home compares: the kind and the sha256 (mode is not compared)."""
        return "gone" if self.kind == "gone" else f"{self.kind}:{self.sha256}"


class SharedHomeBackend(Protocol):
    """Where a home's shared files are kept for other homes (store/pg/home_files.py)."""

    @property
    def is_shared(self) -> bool: ...

    def version(self) -> int:
        """The counter: it moves with every publish."""
        ...

    def changes(self, since: int) -> list[SharedFile]:
        """Every row published after ``since``, oldest first."""
        ...

    def get(self, path: str) -> SharedFile | None: ...

    def publish(self, files: Sequence[SharedFile]) -> int:
        """Store ``files`` under one new counter value, in one transaction; returns that value."""
        ...

    def lock(self, path: str) -> AbstractContextManager[None]:
        """Held across one read-modify-write of ``path``, by every home on the store."""
        ...


class LocalHome:
    """No ``[store] url``: every gateway of the home reads the files themselves; nothing to share."""

    is_shared = False

    def version(self) -> int:
        return 0

    def changes(self, since: int) -> list[SharedFile]:
        return []

    def get(self, path: str) -> SharedFile | None:
        return None

    def publish(self, files: Sequence[SharedFile]) -> int:
        return 0

    def lock(self, path: str) -> AbstractContextManager[None]:
        return contextlib.nullcontext()


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncReport:
    pushed: tuple[str, ...] = ()
    pulled: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  # one message per refused row: what, and why
    overridden: tuple[str, ...] = ()  # paths changed here and elsewhere; this home's change won

    @property
    def changed(self) -> bool:
        return bool(self.pushed or self.pulled)


@dataclass(kw_only=True, slots=True)
class _Manifest:
    version: int = 0
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (digest, version)
    # path -> (version, why): shared rows this home refused and still does not have; kept so that
    # `pincer doctor` names them after the sync that met them (cleared by a newer copy of the path)
    refused: dict[str, tuple[int, str]] = field(default_factory=dict)


class HomeSync:
    """One home's side of the shared files (see the module docstring)."""

    def __init__(self, home: Path, backend: SharedHomeBackend) -> None:
        self.home = Path(os.path.abspath(home))
        self.backend = backend
        self._hashes: dict[str, tuple[tuple[int, ...], str]] = {}  # path -> (stat stamp, sha256)
        self._synced_version = -1  # the manifest's version as this process last read or wrote it

    @property
    def is_shared(self) -> bool:
        return self.backend.is_shared

    # -- what the gateway checks every interval -------------------------------------------

    def sync_if_needed(self) -> SyncReport:
        """A sync when the counter moved or a shared file here changed; else nothing (one tiny
        statement and a walk of the shared roots' stamps)."""
        if not self.is_shared:
            return SyncReport()
        if self.backend.version() == self._synced_version:
            manifest = self._read_manifest()
            known = {path: digest for path, (digest, _) in manifest.files.items() if digest != "gone"}
            if self._scan() == known:
                return SyncReport()
        return self.sync()

    # -- a whole sync -----------------------------------------------------------------------

    def sync(self) -> SyncReport:
        if not self.is_shared:
            return SyncReport()
        with locked(self.home / MANIFEST_FILE):
            manifest = self._read_manifest()
            joining = manifest.version == 0 and not manifest.files
            local = self._scan()
            base = manifest.files
            changed_here = {p for p, digest in local.items() if base.get(p, ("gone", 0))[0] != digest}
            gone_here = {p for p, (digest, _) in base.items() if digest != "gone" and p not in local}
            rows: dict[str, SharedFile] = {}
            for row in self.backend.changes(manifest.version):
                rows[row.path] = row  # oldest first: the newest row of a path wins
            newest = max([manifest.version, *(row.version for row in rows.values())])
            overridden: list[str] = []
            for path in sorted((changed_here | gone_here) & set(rows)):
                if joining:  # a home's first sync: what is shared wins over what it had
                    changed_here.discard(path)
                    gone_here.discard(path)
                else:
                    overridden.append(path)
                    del rows[path]
            pulled, refused = self._materialise(rows.values(), manifest, local)
            read = [self._read_local(path) for path in sorted(changed_here)]
            pushes = [p for p in read if p is not None] + [SharedFile.of(path, "gone") for path in sorted(gone_here)]
            if pushes:
                version = self.backend.publish(pushes)
                for pushed in pushes:
                    base[pushed.path] = (pushed.digest, version)
                    manifest.refused.pop(pushed.path, None)  # this home's copy is the shared one now
                if version == newest + 1:  # nobody else published in between
                    newest = version
            manifest.version = newest
            self._write_manifest(manifest)
            return SyncReport(
                pushed=tuple(p.path for p in pushes), pulled=tuple(pulled), refused=tuple(refused),
                overridden=tuple(overridden),
            )  # fmt: skip

    # -- one path, for a read-modify-write ------------------------------------------------

    def pull_one(self, rel: str) -> list[str]:
        """Bring ``rel`` up to its newest shared copy; the refusals, if any."""
        with locked(self.home / MANIFEST_FILE):
            manifest = self._read_manifest()
            row = self.backend.get(rel)
            if row is None or row.version <= manifest.files.get(rel, ("", 0))[1]:
                return []
            local = {rel: digest} if (digest := self._digest_of(rel)) is not None else {}
            _, refused = self._materialise([row], manifest, local)
            self._write_manifest(manifest)
            return refused

    def push_one(self, rel: str) -> None:
        """Publish ``rel`` when it differs from what was last synced."""
        with locked(self.home / MANIFEST_FILE):
            manifest = self._read_manifest()
            digest = self._digest_of(rel) or "gone"
            if manifest.files.get(rel, ("gone", 0))[0] == digest:
                return
            shared = self._read_local(rel) if digest != "gone" else SharedFile.of(rel, "gone")
            if shared is None:
                return
            version = self.backend.publish([shared])
            manifest.files[rel] = (shared.digest, version)
            manifest.refused.pop(rel, None)
            if version == manifest.version + 1:
                manifest.version = version
            self._write_manifest(manifest)

    # -- the home's files -------------------------------------------------------------------

    def _scan(self) -> dict[str, str]:
        """path -> digest of every shared file and link of this home."""
        found: dict[str, str] = {}
        for root in SHARED_ROOTS:
            top = self.home / root
            if (os.path.islink(top) and not os.path.isdir(top)) or os.path.isfile(top):
                if (digest := self._digest_of(root)) is not None:
                    found[root] = digest
                continue
            for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
                dirnames[:] = sorted(d for d in dirnames if d not in linked and not _is_transient(d))
                for name in [*filenames, *linked]:
                    if _is_transient(name):
                        continue
                    rel = Path(dirpath, name).relative_to(self.home).as_posix()
                    if (digest := self._digest_of(rel)) is not None:
                        found[rel] = digest
        return found

    def _digest_of(self, rel: str) -> str | None:
        """The digest of what is at ``rel`` now (None: nothing, or nothing shareable)."""
        path = self.home / rel
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if os.path.islink(path):
            return "link:" + _sha256(os.readlink(path).encode())
        if not os.path.isfile(path):
            return None
        if info.st_size > MAX_SHARED_FILE_BYTES:
            logger.warning("%s is larger than %d bytes and is not shared", path, MAX_SHARED_FILE_BYTES)
            return None
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        cached = self._hashes.get(rel)
        if cached is not None and cached[0] == stamp:
            return "file:" + cached[1]
        try:
            digest = _sha256(path.read_bytes())
        except OSError:
            return None
        self._hashes[rel] = (stamp, digest)
        return "file:" + digest

    def _read_local(self, rel: str) -> SharedFile | None:
        path = self.home / rel
        try:
            if os.path.islink(path):
                return SharedFile.of(rel, "link", os.readlink(path).encode())
            data = path.read_bytes()
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            return None  # gone since the scan: the next sync publishes the deletion
        return SharedFile.of(rel, "file", data, mode=mode)

    def _materialise(
        self, rows: Iterable[SharedFile], manifest: _Manifest, local: dict[str, str]
    ) -> tuple[list[str], list[str]]:
        """Write ``rows`` into the home (the manifest updated for each); (paths written, refusals)."""
        base = manifest.files
        pulled: list[str] = []
        refused: list[str] = []

        def order(row: SharedFile) -> tuple[int, int, str]:
            if row.path in _LAST:
                return (3, _LAST.index(row.path), row.path)
            if row.kind == "gone":
                return (0 if os.path.islink(self.home / row.path) else 4, 0, row.path)
            return (1 if row.kind == "file" else 2, 0, row.path)

        due = [row for row in sorted(rows, key=order) if row.version > base.get(row.path, ("", 0))[1]]
        problems = {row.path: why for row in due if (why := self._problem(row)) is not None}
        # Where each link leads is checked twice: in the home as it is, each row laid over it in
        # turn (a link already on the disk counts), and in the home as all the rows claim it will
        # be (a link through another link of the same sync counts, whatever their order).
        links = LinkView(self.home, folders=_SHARED_FOLDERS, files=_SHARED_FILES)
        claimed = LinkView(self.home, folders=_SHARED_FOLDERS, files=_SHARED_FILES)
        # Not counted against a row: links that led out before this sync (`pincer doctor` names
        # them) and those it removes.
        known = [*links.problems(), *(row.path for row in due if row.kind == "gone")]
        for row in due:
            if row.path not in problems:
                claimed.lay(row.path, row.kind, _target(row))
        claimed_problems = claimed.problems()
        for row in due:
            problem = problems.get(row.path)
            if problem is None and row.kind == "link" and row.path in claimed_problems:
                problem = f"it is a link to {_target(row)!r}, which with the other rows shared {claimed_problems[row.path]}"
            if problem is None:
                problem = links.admit(row.path, row.kind, _target(row), known=known)
            if problem is not None:
                if row.kind == "link":
                    links.refuse(row.path)
                message = (
                    f"the shared copy of {row.path} (version {row.version}) was refused: {problem}; "
                    f"this home keeps what it had (to share it again, repeat the change on the machine it came "
                    f"from, e.g. `pincer tools install` or `pincer mcp add`)"
                )
                refused.append(message)
                manifest.refused[row.path] = (row.version, message)
                continue
            if local.get(row.path, "gone") != row.digest:
                try:
                    self._write(row)
                except OSError as exc:
                    raise StoreError(
                        f"cannot write the shared file {self.home / row.path}: {exc.strerror}",
                        hint="check the permissions of PINCER_HOME",
                    ) from None
                pulled.append(row.path)
            base[row.path] = (row.digest, row.version)
            manifest.refused.pop(row.path, None)
        return pulled, refused

    def _problem(self, row: SharedFile) -> str | None:
        """Why ``row`` must not be written into a home (None: it may)."""
        parts = row.path.split("/")
        if (
            not row.path or row.path.startswith("/") or "\\" in row.path or "\x00" in row.path
            or any(p in ("", ".", "..") for p in parts) or not _in_roots(row.path)
            or any(_is_transient(p) for p in parts)
        ):  # fmt: skip
            return "its path is not one of the shared registry files of a home"
        if row.path in _SHARED_FOLDERS:
            return f"its path is the shared folder {row.path} itself; only what is inside it is shared"
        if row.kind not in ("file", "link", "gone"):
            return f"its kind {row.kind!r} is none of file, link, gone"
        actual = _sha256(row.data)
        if actual != row.sha256:
            return (
                f"its bytes hash to sha256 {actual}, not to the sha256 {row.sha256} recorded with them "
                "(they were changed or corrupted in the database)"
            )
        if len(row.data) > MAX_SHARED_FILE_BYTES:
            return f"it is larger than {MAX_SHARED_FILE_BYTES} bytes"
        if row.kind == "link":  # where it leads: LinkView, over the home as it will be
            try:
                row.data.decode("utf-8")
            except UnicodeDecodeError:
                return "its link target is not UTF-8"
        return None

    def _write(self, row: SharedFile) -> None:
        target = self.home / row.path
        self._clear_parents(row.path)
        if row.kind == "gone":
            if os.path.islink(target) or os.path.isfile(target):
                os.unlink(target)
            self._prune(target.parent, _root_of(row.path))
            return
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        if row.kind == "file":
            write_bytes_atomic(target, row.data, mode=(row.mode & 0o777) | 0o600)
            return
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.link")
        os.symlink(row.data.decode("utf-8"), temp)
        try:
            os.replace(temp, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def _clear_parents(self, rel: str) -> None:
        """A link or a file where a folder of ``rel`` must be (the shape changed: a linked skill
        became a folder) is removed, so nothing is written through a link."""
        root = _root_of(rel)
        below = rel[len(root) :].strip("/").split("/")[:-1]
        current = self.home / root
        for part in below:
            current = current / part
            if os.path.islink(current) or (os.path.lexists(current) and not os.path.isdir(current)):
                os.unlink(current)

    def _prune(self, folder: Path, root: str) -> None:
        """Empty folders left by a deletion go too, up to (not including) the shared root."""
        top = self.home / root
        while folder != top and top in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    # -- what this home last synced -------------------------------------------------------

    def _read_manifest(self) -> _Manifest:
        raw: Any = read_json(self.home / MANIFEST_FILE, default=None)
        manifest = _Manifest()
        if isinstance(raw, dict) and isinstance(raw.get("version"), int) and isinstance(raw.get("files"), dict):
            manifest.version = raw["version"]
            for path, entry in raw["files"].items():
                if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], int):
                    manifest.files[str(path)] = (entry[0], entry[1])
            for path, entry in (raw.get("refused") or {}).items():
                if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) and isinstance(entry[1], str):
                    manifest.refused[str(path)] = (entry[0], entry[1])
        self._synced_version = manifest.version
        return manifest

    def _write_manifest(self, manifest: _Manifest) -> None:
        files = {path: [digest, version] for path, (digest, version) in sorted(manifest.files.items())}
        document: dict[str, Any] = {"version": manifest.version, "files": files}
        if manifest.refused:
            document["refused"] = {path: [version, why] for path, (version, why) in sorted(manifest.refused.items())}
        write_json_atomic(self.home / MANIFEST_FILE, document)
        self._synced_version = manifest.version


def refused_rows(home: Path) -> dict[str, str]:
    """The shared rows ``home`` refused and still does not have (path -> why), for `pincer doctor`."""
    return {path: why for path, (_, why) in HomeSync(home, LocalHome())._read_manifest().refused.items()}


def links_leading_out(home: Path) -> dict[str, str]:
    """The links of ``home``'s shared roots that lead out of them now (path -> why), for `pincer doctor`."""
    view = LinkView(Path(os.path.abspath(home)), folders=_SHARED_FOLDERS, files=_SHARED_FILES)
    return {path: f"a link to {view.target(path)!r}, {why}" for path, why in view.problems().items()}


# -- the homes of this process whose registry is shared ----------------------------------------

_ACTIVE: dict[Path, list[HomeSync]] = {}  # the newest of a home's is used (the CLI's, then its Pincer's)


def share(sync: HomeSync) -> None:
    """Route read-modify-writes of ``sync``'s home through the store (see :func:`shared_write`)."""
    if sync.is_shared:
        _ACTIVE.setdefault(sync.home, []).append(sync)
        set_shared_write(shared_write)


def unshare(sync: HomeSync) -> None:
    syncs = _ACTIVE.get(sync.home, [])
    if sync in syncs:
        syncs.remove(sync)
    if not syncs:
        _ACTIVE.pop(sync.home, None)


@contextlib.contextmanager
def shared_write(path: Path) -> Iterator[None]:
    """``jsonfile.locked``'s part for a shared file: the store's lock on the path, held across
    the read-modify-write, the newest copy read first and the write published before the end."""
    found = _owner(path) if _ACTIVE else None
    if found is None:
        yield
        return
    sync, rel = found
    with sync.backend.lock(rel):
        for refusal in sync.pull_one(rel):
            logger.error("%s", refusal)
        yield
        sync.push_one(rel)


def _owner(path: Path) -> tuple[HomeSync, str] | None:
    absolute = Path(os.path.abspath(path))
    for home, syncs in _ACTIVE.items():
        if home in absolute.parents and syncs:
            rel = absolute.relative_to(home).as_posix()
            if _in_roots(rel) and not any(_is_transient(p) for p in rel.split("/")):
                return syncs[-1], rel
    return None

