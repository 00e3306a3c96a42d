"""The lifecycle: install, update, outdated, remove, rollback, pin, unpin, installed, verify.

An install of one artifact (or of a bundle's members, or of a whole workspace lock) is one
step with one :class:`~pincer.hub.journal.Journal`:

1. **stage**: fetch into a staging folder under ``$PINCER_HOME`` (``.hub-staging-*``): the
   archive within ``[hub] max_archive_bytes``, its sha256 checked *before* anything is unpacked
   (mandatory: an IronClaw entry without one is refused), the signature over the manifest checked
   against the trust store, then unpacked safely (:mod:`pincer.hub.archive`) and every file
   compared with the signed manifest (and with the lock's fingerprint, when a lock names one);
2. **check**: the install-time scanner (high severity blocks unless ``--force``) and the kind's
   own checks (a WASM component is compiled: the progress bar shows it);
3. **commit**: the staged version is renamed into the artifact store, made active by one rename
   (a symlink swap, or one atomic rewrite of an entry file), ``pincer.lock`` rewritten, the
   action audited.

Any failure before the end undoes what the commit did, in reverse, and removes the staging
folder: the disk is as it was, byte for byte. Each change is journaled before it is made, so a
process killed mid-step leaves a journal the next lifecycle step replays first (back, or forward
when the step had committed): the disk is as before or as after, never between. A running ``pincer serve`` picks the change up
(its state watcher); a WASM call in flight finishes on the component it started with.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pincer.core.errors import (
    ArtifactNotFound,
    ArtifactRefused,
    IntegrityMismatch,
    LocalEdits,
    PincerError,
    ScanBlocked,
    SignatureRefused,
    UsageError,
)
from pincer.hub import deploy
from pincer.hub.archive import ArchiveLimits, unpack
from pincer.hub.artifact import ArtifactKey, ArtifactKind, fingerprint, is_version, parse_key, parse_spec, parse_version
from pincer.hub.catalog import Catalog
from pincer.hub.download import DOWNLOAD_TIMEOUT_S
from pincer.hub.integrity import Mismatch, check_entry, signature_problem
from pincer.hub.journal import Journal, recover
from pincer.hub.layout import FILES_DIR, META_FILE, hash_folder, read_meta, version_dirs, versions_dir
from pincer.hub.lockfile import LOCK_FILENAME, LockEntry, Lockfile
from pincer.hub.scanner import ScanReport, scan_path
from pincer.hub.sources import Resolved, Source

logger = logging.getLogger(__name__)

__all__ = ["Hub", "InstallOptions", "InstallResult", "Progress", "AuditSink", "STATE_FILE"]

STATE_FILE = "state.json"  # per artifact: which stored version is active, which one came before
STALE_STAGING_S = 3600.0  # a staging folder this old is a killed install's; it is removed

# (stage, done, total): "download" in bytes, "compiling", "installing" as stages.
Progress = Callable[[str, int, int | None], None]
# (action, key, version, reason): one audit record per lifecycle step that changed something.
AuditSink = Callable[[str, str, str, str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallOptions:
    force: bool = False  # install past high scanner findings, over local edits, over foreign files
    allow_unsigned: bool = False
    expected_fingerprint: str | None = None  # a lock's: the content must be exactly this
    allow_yanked: bool = False  # only a lock that pins the version exactly
    source: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallResult:
    key: str
    version: str
    source: str
    fingerprint: str
    action: str  # installed | updated | reinstalled | unchanged | rolled back | removed | skipped
    signer: str = ""
    allow_unsigned: bool = False
    previous: str | None = None
    findings: tuple[dict[str, Any], ...] = ()
    requested: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    members: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "version": self.version,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "action": self.action,
            "signer": self.signer,
            "allow_unsigned": self.allow_unsigned,
            "previous": self.previous,
            "findings": list(self.findings),
            "requested": self.requested,
            "notes": list(self.notes),
            "members": list(self.members),
        }


@dataclass(kw_only=True, slots=True)
class _Staged:
    key: ArtifactKey
    resolved: Resolved
    source: Source
    staging: Path  # the version folder being built: files/ + meta.json
    fingerprint: str
    signer: str
    signer_key: str
    allow_unsigned: bool
    prepared: deploy.Prepared
    report: ScanReport
    notes: list[str] = field(default_factory=list)
    members: tuple[str, ...] = ()
    unchanged: bool = False


class Hub:
    """The lifecycle over one ``$PINCER_HOME``. ``audit`` records what changed (the CLI passes
    the audit log's; tests may pass None)."""

    def __init__(
        self,
        home: Path,
        *,
        catalog: Catalog,
        limits: ArchiveLimits | None = None,
        trust: Any = None,
        audit: AuditSink | None = None,
        progress: Progress | None = None,
        download_timeout_s: float = DOWNLOAD_TIMEOUT_S,
    ) -> None:
        from pincer.hub.trust import TrustStore

        self.home = Path(home)
        self.catalog = catalog
        self.limits = limits or ArchiveLimits()
        self.trust = trust if trust is not None else TrustStore(self.home)
        self.audit = audit
        self.progress = progress
        self.download_timeout_s = download_timeout_s
        self.lock_path = self.home / LOCK_FILENAME

    # -- helpers ---------------------------------------------------------------------------

    def _step(self, stage: str, done: int = 0, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def lock(self) -> Lockfile:
        return Lockfile.read(self.lock_path)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One lifecycle step at a time per home (an flock on the home folder itself: no lock
        file appears, so a refused install leaves nothing behind)."""
        fd = os.open(self.home, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.recover()
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def recover(self) -> str | None:
        """Replay the journal of a step whose process died ("rolled back" / "rolled forward"),
        or None. Every lifecycle step calls it first, holding the home's lock."""
        def prune(kind: str, name: str) -> None:
            _prune(self.home, ArtifactKey(kind=ArtifactKind(kind), name=name))

        return recover(self.home, prune=prune)

    def _record(self, action: str, key: str, version: str, reason: str) -> None:
        if self.audit is not None:
            self.audit(action, key, version, reason)

    def key_of(self, text: str, *, source: str | None = None) -> ArtifactKey:
        """A key, or a bare name: installed ones first, then the catalog's."""
        if "/" in text:
            return parse_key(text)
        installed = {e.kind for e in self.lock().entries if e.name == text}
        if len(installed) == 1:
            return ArtifactKey(kind=installed.pop(), name=text)
        if len(installed) > 1:
            return parse_key(text, kinds={text: installed})
        return self.catalog.parse(text, source=source)

    # -- staging ---------------------------------------------------------------------------

    def _stage(self, key: ArtifactKey, wanted: str | None, options: InstallOptions, root: Path, lock: Lockfile) -> _Staged:
        if key.kind is ArtifactKind.CHANNEL:
            raise ArtifactRefused(f"{key} is an IronClaw channel; pincer lists channels but does not run them",
                                  hint="channels need IronClaw; install the tools instead")  # fmt: skip
        if options.source is None and wanted is None and options.expected_fingerprint is None:
            self.catalog.check_unambiguous(key, None)
        source, resolved = self.catalog.resolve(key, wanted, source=options.source, allow_yanked=options.allow_yanked)
        have = lock.get(key)
        if (
            have is not None and not options.force and have.version == resolved.version and have.source == source.name
            and key.kind is not ArtifactKind.BUNDLE and check_entry(self.home, have) is None
            and options.expected_fingerprint in (None, have.fingerprint)
        ):  # fmt: skip
            # Versions are immutable: the same version from the same source, intact, is done.
            return _Staged(
                key=key, resolved=resolved, source=source, staging=root, fingerprint=have.fingerprint, signer=have.signer,
                signer_key=have.signer_key, allow_unsigned=have.allow_unsigned, prepared=deploy.Prepared(),
                report=ScanReport(), unchanged=True,
            )  # fmt: skip
        staging = root / f"{key.kind.prefix}-{key.name}-{uuid.uuid4().hex[:6]}"
        staging.mkdir()
        files_dir = staging / FILES_DIR
        notes: list[str] = []
        signer, signer_key, unsigned = self._check_signature(resolved, options)
        members = resolved.members
        if resolved.archive_url is not None:
            data = source.fetch(
                resolved,
                max_bytes=self.limits.max_archive_bytes,
                progress=lambda done, total: self._step("download", done, total),
                timeout_s=self.download_timeout_s,
            )
            _check_sha256(resolved, data)
            digests = unpack(data, files_dir, limits=self.limits)
            if key.kind is ArtifactKind.BUNDLE:
                members = _bundle_members(files_dir, resolved)
        elif resolved.members:
            files_dir.mkdir()
            (files_dir / "bundle.json").write_text(json.dumps({"members": list(resolved.members)}, indent=2) + "\n")
            digests = hash_folder(files_dir)
        elif resolved.files:
            files_dir.mkdir()
            for name, content in resolved.files.items():
                (files_dir / name).write_bytes(content)
            digests = hash_folder(files_dir)
        else:
            raise ArtifactRefused(f"{resolved.label} has nothing to install", hint="the source's entry is incomplete")
        if resolved.manifest is not None:
            _check_manifest_files(resolved, digests)
        self._step("checking", 0, None)
        report = scan_path(files_dir)
        prepared = deploy.prepare(key.kind, key, files_dir, home=self.home, step=lambda s: self._step(s, 0, None))
        report = ScanReport(findings=report.findings + prepared.findings, files=report.files)
        final = hash_folder(files_dir)
        artifact_fp = fingerprint(final)
        if resolved.manifest is not None and artifact_fp != resolved.manifest.fingerprint:
            raise IntegrityMismatch(
                f"{resolved.label}: the files make fingerprint {artifact_fp}, the signed manifest says {resolved.manifest.fingerprint}",
                hint="the archive does not hold what was signed; do not install it",
            )
        if options.expected_fingerprint is not None and artifact_fp != options.expected_fingerprint:
            raise IntegrityMismatch(
                f"{resolved.label} from {source.name!r} has fingerprint {artifact_fp}, the lock says {options.expected_fingerprint}",
                hint="the source now serves other content under that version; find out why before you install it",
            )
        if report.has_high and not options.force:
            deploy.drop_compile_cache(self.home, prepared)
            high = report.high
            first = high[0]
            raise ScanBlocked(
                f"{resolved.label}: the install-time scanner found {len(high)} high-severity finding(s), e.g. "
                f"{first.rule} at {first.file}:{first.line}: {first.message}",
                findings=tuple(f.to_json() for f in report.findings),
                hint="`pincer install` lists every finding with this refusal (--json: error.findings); "
                "--force installs it anyway",
            )
        notes.extend(prepared.notes)
        return _Staged(
            key=key, resolved=resolved, source=source, staging=staging, fingerprint=artifact_fp, signer=signer,
            signer_key=signer_key, allow_unsigned=unsigned, prepared=prepared, report=report, notes=notes,
            members=members,
        )  # fmt: skip

    def _check_signature(self, resolved: Resolved, options: InstallOptions) -> tuple[str, str, bool]:
        """(signer name, signer key, installed unsigned?) or SignatureRefused."""
        from pincer.hub.signing import key_id, verify_manifest

        manifest, signature, public = resolved.manifest, resolved.signature, resolved.public_key
        if manifest is None or not signature or not public:
            if not options.allow_unsigned:
                raise SignatureRefused(
                    f"{resolved.label} from {resolved.source!r} is not signed",
                    hint="install only what a trusted publisher signed; --allow-unsigned installs it anyway (recorded in "
                    "pincer.lock and the audit log)",
                )
            return "", "", True
        try:
            verify_manifest(manifest, signature, public)
        except SignatureRefused:
            if not options.allow_unsigned:
                raise
            return "", public, True
        trusted = self.trust.signer_of(public)
        if trusted is None:
            if not options.allow_unsigned:
                raise SignatureRefused(
                    f"{resolved.label} is signed by key {key_id(public)} ({resolved.publisher or 'unknown publisher'}), "
                    "which is not in the trust store",
                    hint=f"if you trust it: `pincer hub trust add NAME {public}`; or --allow-unsigned (recorded)",
                )
            return "", public, True
        return trusted.name, public, False

    # -- commit ----------------------------------------------------------------------------

    def _commit(self, staged: list[_Staged], options: InstallOptions, lock: Lockfile, tx: Journal) -> tuple[Lockfile, list[tuple[_Staged, Path, str | None]]]:
        done: list[tuple[_Staged, Path, str | None]] = []
        # Everything that could refuse is asked before the first rename.
        for item in staged:
            previous_entry = lock.get(item.key)
            if previous_entry is not None and not options.force:
                edited = check_entry(self.home, previous_entry)
                if edited is not None and edited.problem != "missing":
                    raise LocalEdits(
                        f"{edited.reason}; installing over it would lose the edits",
                        hint="`pincer verify` shows the files; --force replaces them",
                    )
            deploy.check_activation(self.home, item.key, force=options.force, ours=previous_entry is not None)
        for item in staged:
            key = item.key
            previous_entry = lock.get(key)
            meta = self._meta(item, previous_entry)
            (item.staging / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            target_parent = versions_dir(self.home, key)
            tx.removes_new_dirs(target_parent)
            target_parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target = target_parent / f"{item.resolved.version}@{item.fingerprint[7:19]}-{uuid.uuid4().hex[:6]}"
            tx.removes(target)
            os.rename(item.staging, target)
            previous_dir = _active_dir(self.home, key)
            deploy.activate(self.home, key, target, item.prepared, force=options.force, ours=previous_entry is not None,
                            journal=tx)  # fmt: skip
            _write_state(self.home, key, active=target.name, previous=previous_dir, journal=tx)
            lock = lock.with_entry(
                LockEntry(
                    kind=key.kind, name=key.name, version=item.resolved.version, source=item.source.name,
                    fingerprint=item.fingerprint, signer=item.signer, signer_key=item.signer_key,
                    allow_unsigned=item.allow_unsigned, pinned=previous_entry.pinned if previous_entry else False,
                    members=previous_entry.members if previous_entry and key.kind is ArtifactKind.BUNDLE else (),
                )
            )
            done.append((item, target, previous_entry.version if previous_entry else None))
        return lock, done

    def _meta(self, item: _Staged, previous: LockEntry | None) -> dict[str, Any]:
        files = []
        for path, digest in sorted(hash_folder(item.staging / FILES_DIR).items()):
            files.append({"path": path, "sha256": digest, "size": (item.staging / FILES_DIR / path).stat().st_size})
        return {
            "kind": item.key.kind.value,
            "name": item.key.name,
            "version": item.resolved.version,
            "fingerprint": item.fingerprint,
            "files": files,
            "source": item.source.name,
            "signer": item.signer,
            "signer_key": item.signer_key,
            "allow_unsigned": item.allow_unsigned,
            "manifest": item.resolved.manifest.to_json() if item.resolved.manifest is not None else None,
            "signature": item.resolved.signature,
            "public_key": item.resolved.public_key,
            "entry_sha256": item.prepared.entry_sha256,
            "entry": item.prepared.entry,
            "members": list(item.members),
            "requested": item.prepared.requested or dict(item.resolved.requested),
            "findings": [f.to_json() for f in item.report.findings],
            "installed_at": time.time(),
            "replaced": previous.version if previous else None,
        }

    def _write_lock(self, lock: Lockfile, tx: Journal) -> None:
        tx.restores_file(self.lock_path)
        lock.write()

    def _staging_root(self, tx: Journal) -> Path:
        # What a killed install left behind goes first (installs are serialised per home).
        for stale in self.home.glob(".hub-staging-*"):
            try:
                if time.time() - stale.stat().st_mtime > STALE_STAGING_S:
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                continue
        root = self.home / f".hub-staging-{uuid.uuid4().hex[:12]}"
        tx.removes(root)  # journaled too: a killed install's staging goes at the next step
        tx.deletes_at_end(root)
        root.mkdir(mode=0o700)
        return root

    # -- install ---------------------------------------------------------------------------

    def install(self, spec: str, options: InstallOptions | None = None) -> list[InstallResult]:
        """``KEY[@VERSION|@TAG]``: the artifact, or a bundle's installable members and the bundle."""
        options = options or InstallOptions()
        text, wanted = parse_spec(spec)
        key = self.key_of(text, source=options.source) if "/" not in text else parse_key(text)
        with self._exclusive():
            return self._install_keys([(key, wanted, options)], bundle_options=options)

    def _install_keys(self, wanted: Sequence[tuple[ArtifactKey, str | None, InstallOptions]], *,
                      bundle_options: InstallOptions) -> list[InstallResult]:  # fmt: skip
        tx = Journal(self.home)
        root = self._staging_root(tx)
        try:
            lock = self.lock()
            staged: list[_Staged] = []
            skipped: list[InstallResult] = []
            bundles: list[tuple[_Staged, list[str]]] = []
            for key, version, options in wanted:
                item = self._stage(key, version, options, root, lock)
                if key.kind is ArtifactKind.BUNDLE:
                    members: list[str] = []
                    for member_text in item.members:
                        member = parse_key(member_text)
                        if member.kind is ArtifactKind.CHANNEL:
                            skipped.append(InstallResult(key=str(member), version="", source=item.source.name, fingerprint="",
                                                         action="skipped", notes=("a channel: pincer does not run channels",)))  # fmt: skip
                            continue
                        if lock.get(member) is not None:
                            skipped.append(InstallResult(key=str(member), version=lock.get(member).version, source="",  # type: ignore[union-attr]
                                                         fingerprint="", action="skipped", notes=("installed already",)))  # fmt: skip
                            continue
                        member_options = replace(bundle_options, source=item.source.name, expected_fingerprint=None)
                        staged.append(self._stage(member, None, member_options, root, lock))
                        members.append(str(member))
                    bundles.append((item, members))
                staged.append(item)
            unchanged = [s for s in staged if s.unchanged]
            todo = [s for s in staged if not s.unchanged]
            new_lock, done = self._commit(todo, bundle_options, lock, tx)
            for bundle, members in bundles:
                entry = new_lock.get(bundle.key) or lock.get(bundle.key)
                if entry is not None:
                    new_lock = new_lock.with_entry(replace(entry, members=tuple(sorted(set(entry.members) | set(members)))))
            if done or bundles:
                self._write_lock(new_lock, tx)
            tx.commit(prune=[(item.key.kind.value, item.key.name) for item, _target, _previous in done])
            results: list[InstallResult] = []
            for item, _target, previous in done:
                action = "installed" if previous is None else ("reinstalled" if previous == item.resolved.version else "updated")
                reason = f"{action} {item.key}@{item.resolved.version} from {item.source.name} ({item.fingerprint})"
                if item.allow_unsigned:
                    reason += "; UNSIGNED or untrusted signature, allowed by --allow-unsigned"
                else:
                    reason += f"; signed by {item.signer}"
                if item.report.has_high:
                    reason += f"; {len(item.report.high)} high-severity scanner finding(s) overridden by --force"
                self._record(action.replace(" ", "_"), str(item.key), item.resolved.version, reason)
                results.append(_result(item, action, previous))
            for item in unchanged:
                results.append(_result(item, "unchanged", item.resolved.version))
            tx.finish()
            for item, _target, _previous in done:
                _prune(self.home, item.key)
            return results + skipped
        except BaseException:
            tx.rollback()
            for item in staged if "staged" in locals() else []:
                deploy.drop_compile_cache(self.home, item.prepared)
            raise
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def install_lock(self, path: Path, *, force: bool = False) -> list[InstallResult]:
        """Install exactly what a workspace ``pincer.lock`` lists: every version and
        fingerprint as written, from the source it names, unsigned only where it says so."""
        wanted_lock = Lockfile.read(path)
        if not wanted_lock.entries:
            raise UsageError(f"{path} lists no artifacts", hint="install something first, e.g. `pincer install tools/NAME`")
        with self._exclusive():
            current = self.lock()
            todo = []
            results = []
            for entry in wanted_lock.entries:
                have = current.get(entry.key)
                if have is not None and have.fingerprint == entry.fingerprint and check_entry(self.home, have) is None:
                    results.append(InstallResult(key=str(entry.key), version=entry.version, source=entry.source,
                                                 fingerprint=entry.fingerprint, action="unchanged"))  # fmt: skip
                    continue
                if entry.kind is ArtifactKind.BUNDLE:
                    continue  # its members are entries of their own
                options = InstallOptions(
                    force=force, allow_unsigned=entry.allow_unsigned, expected_fingerprint=entry.fingerprint,
                    allow_yanked=True, source=entry.source,
                )  # fmt: skip
                todo.append((entry.key, entry.version, options))
            if todo:
                results = self._install_keys(todo, bundle_options=InstallOptions(force=force)) + results
            bundles = [e for e in wanted_lock.entries if e.kind is ArtifactKind.BUNDLE and self.lock().get(e.key) is None]
            if bundles:
                lock = self.lock()
                for entry in bundles:
                    lock = lock.with_entry(entry)
                lock.write()
            return results

    # -- update / outdated -----------------------------------------------------------------

    def outdated(self) -> list[dict[str, Any]]:
        rows = []
        for entry in self.lock().entries:
            if entry.kind is ArtifactKind.BUNDLE:
                continue
            try:
                _, resolved = self.catalog.resolve(entry.key, None, source=entry.source)
                latest = resolved.version
            except PincerError as exc:
                rows.append({"key": str(entry.key), "installed": entry.version, "latest": None, "pinned": entry.pinned,
                             "source": entry.source, "outdated": False, "error": exc.message})  # fmt: skip
                continue
            newer = is_version(latest) and is_version(entry.version) and parse_version(latest) > parse_version(entry.version)
            rows.append({"key": str(entry.key), "installed": entry.version, "latest": latest, "pinned": entry.pinned,
                         "source": entry.source, "outdated": newer})  # fmt: skip
        return rows

    def update(self, text: str | None, *, force: bool = False, allow_unsigned: bool = False) -> list[InstallResult]:
        """One artifact (``text``) or every one (None) to the newest version its source has;
        pinned ones are left alone (named, for ``--all``; refused, for one)."""
        lock = self.lock()
        if text is not None:
            key = self.key_of(text)
            entry = lock.get(key)
            if entry is None:
                raise ArtifactNotFound(f"{key} is not installed", hint=f"`pincer install {key}` installs it")
            if entry.pinned:
                raise UsageError(f"{key} is pinned at {entry.version}", hint=f"`pincer unpin {key}` first")
            entries = [entry]
        else:
            entries = [e for e in lock.entries if e.kind is not ArtifactKind.BUNDLE]
        results: list[InstallResult] = []
        for entry in entries:
            if entry.pinned:
                results.append(InstallResult(key=str(entry.key), version=entry.version, source=entry.source,
                                             fingerprint=entry.fingerprint, action="skipped", notes=("pinned",)))  # fmt: skip
                continue
            try:
                _, resolved = self.catalog.resolve(entry.key, None, source=entry.source)
            except PincerError as exc:
                if text is not None:
                    raise
                # --all: one source gone or one key withdrawn must not stop the others.
                results.append(InstallResult(key=str(entry.key), version=entry.version, source=entry.source,
                                             fingerprint=entry.fingerprint, action="skipped", notes=(exc.message,)))  # fmt: skip
                continue
            if not (is_version(resolved.version) and parse_version(resolved.version) > parse_version(entry.version)):
                results.append(InstallResult(key=str(entry.key), version=entry.version, source=entry.source,
                                             fingerprint=entry.fingerprint, action="unchanged", notes=("up to date",)))  # fmt: skip
                continue
            options = InstallOptions(force=force, allow_unsigned=allow_unsigned, source=entry.source)
            with self._exclusive():
                results.extend(self._install_keys([(entry.key, resolved.version, options)], bundle_options=options))
        return results

    # -- remove / rollback / pin -----------------------------------------------------------

    def remove(self, text: str) -> list[InstallResult]:
        key = self.key_of(text)
        with self._exclusive():
            lock = self.lock()
            entry = lock.get(key)
            if entry is None:
                raise ArtifactNotFound(f"{key} was not installed from the hub", hint="`pincer installed` lists what was")
            keys = [key]
            if key.kind is ArtifactKind.BUNDLE:
                others = {m for e in lock.entries if e.kind is ArtifactKind.BUNDLE and e.key != key for m in e.members}
                keys = [parse_key(m) for m in entry.members if m not in others and lock.get(parse_key(m))] + [key]
            tx = Journal(self.home)
            try:
                new_lock = lock
                for item in keys:
                    deploy.deactivate(self.home, item, tx)
                    new_lock = new_lock.without(item)
                    tx.deletes_at_end(versions_dir(self.home, item))
                self._write_lock(new_lock, tx)
                tx.commit()
            except BaseException:
                tx.rollback()
                raise
            tx.finish()
            results = []
            for item in keys:
                removed = lock.get(item)
                assert removed is not None
                self._record("remove", str(item), removed.version, f"removed {item}@{removed.version}")
                results.append(InstallResult(key=str(item), version=removed.version, source=removed.source,
                                             fingerprint=removed.fingerprint, action="removed"))  # fmt: skip
            return results

    def rollback(self, text: str, *, force: bool = False) -> InstallResult:
        """Back to the version that was active before this one (kept in the store)."""
        key = self.key_of(text)
        with self._exclusive():
            lock = self.lock()
            entry = lock.get(key)
            if entry is None:
                raise ArtifactNotFound(f"{key} is not installed", hint="`pincer installed` lists what is")
            if key.kind is ArtifactKind.BUNDLE:
                raise UsageError("a bundle has no version of its own to roll back", hint="roll back its members one by one")
            state = _read_state(self.home, key)
            previous_name = state.get("previous")
            target = versions_dir(self.home, key) / previous_name if isinstance(previous_name, str) else None
            if target is None or not (target / META_FILE).is_file():
                raise ArtifactNotFound(f"{key} has no earlier version kept to roll back to",
                                       hint="install the version you want: `pincer install KEY@VERSION`")  # fmt: skip
            if not force:
                edited = check_entry(self.home, entry)
                if edited is not None and edited.problem != "missing":
                    raise LocalEdits(f"{edited.reason}; rolling back would lose the edits", hint="--force rolls back anyway")
            meta = read_meta(target)
            files_fp = fingerprint(hash_folder(target / FILES_DIR))
            if files_fp != meta.get("fingerprint"):
                raise IntegrityMismatch(
                    f"the kept version {meta.get('version')} of {key} was edited on disk ({files_fp})",
                    hint=f"install it again instead: `pincer install {key}@{meta.get('version')} --force`",
                )
            stored_entry = meta.get("entry") if isinstance(meta.get("entry"), dict) else None
            prepared = deploy.Prepared(entry=stored_entry, entry_sha256=meta.get("entry_sha256"))
            tx = Journal(self.home)
            try:
                current_dir = _active_dir(self.home, key)
                deploy.activate(self.home, key, target, prepared, force=True, ours=True, journal=tx)
                _write_state(self.home, key, active=target.name, previous=current_dir, journal=tx)
                new_entry = replace(
                    entry, version=str(meta.get("version")), fingerprint=str(meta.get("fingerprint")),
                    signer=str(meta.get("signer") or ""), signer_key=str(meta.get("signer_key") or ""),
                    allow_unsigned=bool(meta.get("allow_unsigned")), source=str(meta.get("source") or entry.source),
                )  # fmt: skip
                self._write_lock(lock.with_entry(new_entry), tx)
                tx.commit()
            except BaseException:
                tx.rollback()
                raise
            tx.finish()
            self._record("rollback", str(key), new_entry.version, f"rolled {key} back from {entry.version} to {new_entry.version}")
            return InstallResult(key=str(key), version=new_entry.version, source=new_entry.source, fingerprint=new_entry.fingerprint,
                                 action="rolled back", previous=entry.version, signer=new_entry.signer,
                                 allow_unsigned=new_entry.allow_unsigned)  # fmt: skip

    def pin(self, text: str, *, pinned: bool = True) -> LockEntry:
        key = self.key_of(text)
        with self._exclusive():
            lock = self.lock()
            entry = lock.get(key)
            if entry is None:
                raise ArtifactNotFound(f"{key} is not installed", hint="`pincer installed` lists what is")
            updated = replace(entry, pinned=pinned)
            lock.with_entry(updated).write()
            self._record("pin" if pinned else "unpin", str(key), entry.version, f"{'pinned' if pinned else 'unpinned'} {key}@{entry.version}")
            return updated

    # -- installed / verify ----------------------------------------------------------------

    def installed(self) -> list[dict[str, Any]]:
        rows = []
        for entry in self.lock().entries:
            problem = check_entry(self.home, entry)
            rows.append({**entry.to_json(), "status": "ok" if problem is None else problem.problem,
                         "problem": problem.reason if problem else None})  # fmt: skip
        return rows

    def verify(self) -> tuple[list[LockEntry], list[Mismatch]]:
        """Every lock entry checked on disk, and signed ones' signatures checked again against
        the trust store (a key removed from it since the install is reported)."""
        lock = self.lock()
        problems: list[Mismatch] = []
        for entry in lock.entries:
            mismatch = check_entry(self.home, entry)
            if mismatch is not None:
                problems.append(mismatch)
                continue
            problem = signature_problem(self.home, entry, lambda key: self.trust.signer_of(key) is not None)
            if problem is not None:
                problems.append(Mismatch(key=entry.key, version=entry.version, problem="signature",
                                         expected=entry.fingerprint, actual=None, changed=(problem,)))  # fmt: skip
        return list(lock.entries), problems

    def fix(self, mismatches: list[Mismatch]) -> list[InstallResult]:
        """Reinstall each mismatched artifact from its source, at the locked version and
        fingerprint (unsigned only where the lock says it was allowed)."""
        lock = self.lock()
        todo = []
        for mismatch in mismatches:
            entry = lock.get(mismatch.key)
            if entry is None or entry.kind is ArtifactKind.BUNDLE or entry.source.startswith("mcp:"):
                continue  # a pulled skill has no catalog source to reinstall from (hub/pulled.py)
            todo.append((entry.key, entry.version, InstallOptions(
                force=True, allow_unsigned=entry.allow_unsigned, expected_fingerprint=entry.fingerprint,
                allow_yanked=True, source=entry.source,
            )))  # fmt: skip
        if not todo:
            return []
        with self._exclusive():
            return self._install_keys(todo, bundle_options=InstallOptions(force=True))


# ------------------------------------------------------------------------------------ helpers


def _check_sha256(resolved: Resolved, data: bytes) -> None:
    import hashlib

    if not resolved.archive_sha256:
        raise ArtifactRefused(f"{resolved.label} comes with no sha256; nothing is unpacked without one",
                              hint="ask the source's owner for the archive's sha256")  # fmt: skip
    actual = hashlib.sha256(data).hexdigest()
    if actual != resolved.archive_sha256.lower():
        raise IntegrityMismatch(
            f"{resolved.label}: the archive's sha256 is {actual}, the source says {resolved.archive_sha256}; nothing was unpacked",
            hint="the download was altered or the entry is stale; do not install it",
        )


def _check_manifest_files(resolved: Resolved, digests: dict[str, str]) -> None:
    assert resolved.manifest is not None
    listed = {f.path: f.sha256 for f in resolved.manifest.files}
    extra = sorted(set(digests) - set(listed))
    missing = sorted(set(listed) - set(digests))
    changed = sorted(p for p in listed if p in digests and digests[p] != listed[p])
    if extra or missing or changed:
        parts = [f"changed: {', '.join(changed[:5])}" if changed else "", f"not signed: {', '.join(extra[:5])}" if extra else "",
                 f"missing: {', '.join(missing[:5])}" if missing else ""]  # fmt: skip
        raise IntegrityMismatch(
            f"{resolved.label}: the archive does not hold what its signed manifest lists ({'; '.join(p for p in parts if p)})",
            hint="the archive was tampered with; do not install it",
        )


def _bundle_members(files_dir: Path, resolved: Resolved) -> tuple[str, ...]:
    """A hub bundle's members come from its signed bundle.json, not from unsigned metadata."""
    try:
        data = json.loads((files_dir / "bundle.json").read_text(encoding="utf-8"))
        members = data["members"]
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ValueError("members is not a list of keys")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactRefused(f"{resolved.label}: bundle.json is missing or malformed ({exc})", hint="ask its publisher") from None
    for member in members:
        parse_key(member)
    return tuple(members)


def _result(item: _Staged, action: str, previous: str | None) -> InstallResult:
    return InstallResult(
        key=str(item.key), version=item.resolved.version, source=item.source.name, fingerprint=item.fingerprint,
        action=action, signer=item.signer, allow_unsigned=item.allow_unsigned, previous=previous,
        findings=tuple(f.to_json() for f in item.report.findings), requested=item.prepared.requested or dict(item.resolved.requested),
        notes=tuple(item.notes),
    )  # fmt: skip


def _read_state(home: Path, key: ArtifactKey) -> dict[str, Any]:
    try:
        data = json.loads((versions_dir(home, key) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _active_dir(home: Path, key: ArtifactKey) -> str | None:
    active = _read_state(home, key).get("active")
    return active if isinstance(active, str) and (versions_dir(home, key) / active).is_dir() else None


def _write_state(home: Path, key: ArtifactKey, *, active: str, previous: str | None, journal: Journal) -> None:
    from pincer.store.jsonfile import write_bytes_atomic

    path = versions_dir(home, key) / STATE_FILE
    journal.restores_file(path)
    write_bytes_atomic(path, (json.dumps({"active": active, "previous": previous}, indent=2) + "\n").encode())


def _prune(home: Path, key: ArtifactKey) -> None:
    """Keep the active version and the one before it; older ones go."""
    state = _read_state(home, key)
    keep = {state.get("active"), state.get("previous")}
    for folder in version_dirs(home, key):
        if folder.name not in keep:
            shutil.rmtree(folder, ignore_errors=True)
