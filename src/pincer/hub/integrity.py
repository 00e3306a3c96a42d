"""Installed artifacts, re-verified against ``$PINCER_HOME/pincer.lock``.

At every start (``Pincer.open``) and whenever the runtimes reload, each artifact the lock lists
is hashed where the runtime reads it and its fingerprint compared with the lock's. One that was
edited on disk or replaced is *refused* (the runtime does not load it; a running gateway keeps
the verified version it has in memory) and reported: ``pincer verify`` lists every mismatch with
the files that differ, ``pincer verify --fix`` reinstalls from the source.

What is compared, per kind:

- tool, skill, script: the files behind the active link (see :mod:`pincer.hub.layout`);
- mcp_server, openapi: the entry in ``mcp/servers.json`` / ``openapi/services.json``, against
  the entry the install wrote (its digest is in the version's meta.json, whose fingerprint must
  be the lock's);
- bundle: nothing of its own (its members are entries of their own).

Artifacts the lock does not list (a ``pincer tools install`` of a local file) are not checked.
Standard library only: this runs on every start, also of ``pincer tools list``.

A home whose registry files are shared with other machines' homes (``[store] url``,
store/home_share.py) got its lock and artifacts from the database, which may have been written
by anyone with access to it; its guard (``check_signatures=True``) also checks each signed
entry's signature again, against *this* machine's trust store (``hub/trust.json``, never shared):
:func:`signature_problem`, which imports the signature code only then.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.hub.artifact import ArtifactKey, ArtifactKind, fingerprint
from pincer.hub.layout import (
    active_path,
    entry_digest,
    file_sha256,
    hash_folder,
    read_entry,
    read_meta,
    version_dirs,
)
from pincer.hub.lockfile import LOCK_FILENAME, LockEntry, Lockfile

logger = logging.getLogger(__name__)

__all__ = [
    "Mismatch", "IntegrityGuard", "active_files", "check_entry", "signature_problem", "verify_home", "version_dir_of",
]  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Mismatch:
    key: ArtifactKey
    version: str
    problem: str  # modified | missing | replaced
    expected: str
    actual: str | None
    changed: tuple[str, ...] = ()  # files that differ, were added (+) or are gone (-)

    @property
    def reason(self) -> str:
        if self.problem == "signature":
            return f"{self.key}@{self.version} fails its signature check: {'; '.join(self.changed)}"
        what = {"missing": "is gone from disk", "replaced": "was replaced on disk", "modified": "was edited on disk"}
        files = f" ({', '.join(self.changed[:5])}{', ...' if len(self.changed) > 5 else ''})" if self.changed else ""
        return f"{self.key}@{self.version} {what.get(self.problem, self.problem)} since it was installed{files}"

    def to_json(self) -> dict[str, Any]:
        return {
            "key": str(self.key),
            "version": self.version,
            "problem": self.problem,
            "expected": self.expected,
            "actual": self.actual,
            "changed": list(self.changed),
            "message": self.reason,
        }


def version_dir_of(home: Path, entry: LockEntry) -> Path | None:
    """The stored version a lock entry names (same version and fingerprint), newest first."""
    for folder in reversed(version_dirs(home, entry.key)):
        meta = read_meta(folder)
        if meta.get("version") == entry.version and meta.get("fingerprint") == entry.fingerprint:
            return folder
    return None


def active_files(home: Path, key: ArtifactKey) -> dict[str, str] | None:
    """path -> sha256 of what the runtime reads for ``key``; None when nothing is there."""
    path = active_path(home, key)
    if path is None or not os.path.exists(path):
        return None
    real = Path(os.path.realpath(path))
    if key.kind is ArtifactKind.TOOL:
        files = {f"{key.name}.wasm": file_sha256(real)}
        # the capabilities, and a runner tool's source and manifest (pincer build), beside it
        for sibling in (f"{key.name}.capabilities.json", f"{key.name}.py", f"{key.name}.built.json"):
            other = real.parent / sibling
            if other.is_file():
                files[other.name] = file_sha256(other)
        return files
    if key.kind is ArtifactKind.SKILL:
        return hash_folder(real) if real.is_dir() else None
    if key.kind is ArtifactKind.SCRIPT:
        return {path.name: file_sha256(real)} if real.is_file() else None
    return None


def check_entry(home: Path, entry: LockEntry) -> Mismatch | None:
    """None when what is installed for ``entry`` is what the lock says."""
    key = entry.key
    if entry.kind is ArtifactKind.BUNDLE:
        return None
    stored = version_dir_of(home, entry)
    meta = read_meta(stored) if stored is not None else {}
    if entry.kind in (ArtifactKind.MCP_SERVER, ArtifactKind.OPENAPI):
        live = read_entry(home, entry.kind, entry.name)
        if live is None:
            return Mismatch(key=key, version=entry.version, problem="missing", expected=entry.fingerprint, actual=None)
        digest = entry_digest(live)
        if digest != meta.get("entry_sha256"):
            return Mismatch(
                key=key, version=entry.version, problem="modified", expected=entry.fingerprint, actual=digest,
                changed=("entry",),
            )  # fmt: skip
        return None
    try:
        files = active_files(home, key)
    except OSError as exc:
        return Mismatch(key=key, version=entry.version, problem="missing", expected=entry.fingerprint, actual=None,
                        changed=(f"unreadable: {exc.strerror}",))  # fmt: skip
    if files is None:
        return Mismatch(key=key, version=entry.version, problem="missing", expected=entry.fingerprint, actual=None)
    actual = fingerprint(files)
    if actual == entry.fingerprint:
        return None
    link = active_path(home, key)
    is_ours = link is not None and os.path.islink(link) and stored is not None and (
        Path(os.path.realpath(link)).is_relative_to(os.path.realpath(stored))
    )
    is_ours = is_ours or entry.source.startswith("mcp:")  # pulled in place (hub/pulled.py): an edit
    known = {f["path"]: f["sha256"] for f in meta.get("files", []) if isinstance(f, dict) and "path" in f}
    changed = tuple(
        [p for p in sorted(files) if p in known and known[p] != files[p]]
        + [f"+{p}" for p in sorted(files) if known and p not in known]
        + [f"-{p}" for p in sorted(known) if p not in files]
    )
    return Mismatch(
        key=key, version=entry.version, problem="modified" if is_ours else "replaced", expected=entry.fingerprint,
        actual=actual, changed=changed,
    )  # fmt: skip


def signature_problem(home: Path, entry: LockEntry, trusts: Callable[[str], bool]) -> str | None:
    """Why the signature stored with a signed entry does not hold (None: it holds, or the entry
    was installed unsigned on purpose, ``--allow-unsigned``): the signature over the manifest, the
    manifest's fingerprint against the lock's, and ``trusts(signer key)``: the trust store."""
    if not entry.signer or entry.allow_unsigned or entry.kind is ArtifactKind.BUNDLE:
        return None
    from pincer.core.errors import PincerError, SignatureRefused
    from pincer.hub.artifact import ArtifactManifest
    from pincer.hub.signing import verify_manifest

    stored = version_dir_of(home, entry)
    meta = read_meta(stored) if stored is not None else {}
    try:
        manifest = ArtifactManifest.from_json(meta.get("manifest"), source=str(entry.key))
        verify_manifest(manifest, meta.get("signature"), entry.signer_key)
        if manifest.fingerprint != entry.fingerprint:
            raise SignatureRefused("the signed fingerprint is not the lock's")
        if not trusts(entry.signer_key):
            raise SignatureRefused(f"its signer {entry.signer!r} is not in the trust store of {home}")
    except PincerError as exc:
        return exc.message
    return None


def verify_home(home: Path) -> tuple[list[LockEntry], list[Mismatch]]:
    """Every lock entry of ``home`` and the mismatches among them."""
    lock = Lockfile.read(Path(home) / LOCK_FILENAME)
    problems = [m for m in (check_entry(home, e) for e in lock.entries) if m is not None]
    return list(lock.entries), problems


class IntegrityGuard:
    """What the runtimes ask before they load an artifact: ``refusal(kind, name)`` is None to
    load it, or the reason it was refused. The lock is re-read when it changes; a result is
    kept while neither the lock nor the files' stamps change."""

    def __init__(
        self, home: Path, *, on_refusal: Callable[[Mismatch], None] | None = None, check_signatures: bool = False
    ) -> None:
        self.home = Path(home)
        self.check_signatures = check_signatures  # a shared home's: see the module docstring
        self._lock_path = self.home / LOCK_FILENAME
        self._lock_stamp: tuple[int, int, int] | None = None
        self._lock = Lockfile(path=self._lock_path)
        self._cache: dict[ArtifactKey, tuple[Any, Mismatch | None]] = {}
        self._on_refusal = on_refusal
        self.refused: dict[ArtifactKey, Mismatch] = {}

    def _current_lock(self) -> Lockfile:
        try:
            info = self._lock_path.stat()
            stamp = (info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        except OSError:
            stamp = (0, 0, -1)
        if stamp != self._lock_stamp:
            try:
                self._lock = Lockfile.read(self._lock_path)
            except Exception as exc:  # noqa: BLE001 - a broken lock must not stop pincer; it is reported
                logger.error("%s cannot be read, hub-installed artifacts are not verified: %s", self._lock_path, exc)
                self._lock = Lockfile(path=self._lock_path)
            self._lock_stamp = stamp
            self._cache.clear()
        return self._lock

    def refusal(self, kind: ArtifactKind | str, name: str) -> str | None:
        key = ArtifactKey(kind=ArtifactKind(kind), name=name)
        entry = self._current_lock().get(key)
        if entry is None:
            self.refused.pop(key, None)
            return None
        stamp = (self._lock_stamp, _stamp(self.home, key))
        cached = self._cache.get(key)
        if cached is not None and cached[0] == stamp:
            mismatch = cached[1]
        else:
            mismatch = check_entry(self.home, entry)
            if mismatch is None and self.check_signatures:
                mismatch = self._signature_mismatch(entry)
            self._cache[key] = (stamp, mismatch)
            if mismatch is not None:
                again = "`pincer skills pull` fetches it again" if entry.source.startswith("mcp:") else "`pincer verify --fix` reinstalls it"
                logger.error("refused %s: %s; `pincer verify` lists it, %s", key, mismatch.reason, again)
                if self._on_refusal is not None:
                    self._on_refusal(mismatch)
        if mismatch is None:
            self.refused.pop(key, None)
            return None
        self.refused[key] = mismatch
        if mismatch.problem == "signature":
            return (f"{mismatch.reason} (on every machine whose gateways share the registry, trust the publisher's "
                    f"key as on the one that installed it: `pincer hub trust add {entry.signer} KEY`)")  # fmt: skip
        if entry.source.startswith("mcp:"):
            from pincer.hub.pulled import repull_hint

            return f"{mismatch.reason} ({repull_hint(entry)})"
        return mismatch.reason + " (`pincer verify --fix` reinstalls it)"

    def _signature_mismatch(self, entry: LockEntry) -> Mismatch | None:
        from pincer.hub.trust import TrustStore

        trust = TrustStore(self.home)
        problem = signature_problem(self.home, entry, lambda key: trust.signer_of(key) is not None)
        if problem is None:
            return None
        return Mismatch(key=entry.key, version=entry.version, problem="signature", expected=entry.fingerprint,
                        actual=None, changed=(problem,))  # fmt: skip

    def admits(self, kind: ArtifactKind | str, name: str) -> bool:
        return self.refusal(kind, name) is None


def _stamp(home: Path, key: ArtifactKey) -> Any:
    """Cheap identity of what ``check_entry`` would hash: target paths, sizes, mtimes and change
    times (``os.utime`` puts an mtime back; nothing puts a ctime back)."""
    path = active_path(home, key)
    try:
        if path is None:
            from pincer.hub.layout import entry_file

            where = entry_file(home, key.kind)
            if where is None:
                return None
            info = where[0].stat()
            return (info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        real = os.path.realpath(path)
        if os.path.isdir(real):
            parts = []
            for dirpath, dirnames, filenames in os.walk(real):
                dirnames.sort()
                for filename in sorted(filenames):
                    info = os.lstat(os.path.join(dirpath, filename))
                    parts.append((dirpath, filename, info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino))
            return (real, tuple(parts))
        info = os.stat(real)
        beside = []
        for sibling in (f"{key.name}.capabilities.json", f"{key.name}.py", f"{key.name}.built.json"):
            other = Path(real).parent / sibling
            found = other.stat() if other.is_file() else None
            beside.append((found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino) if found else None)
        return (real, info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, *beside)
    except OSError:
        return None
