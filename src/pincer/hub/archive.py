"""Artifact archives: deterministic ``.tar.gz`` packing and unpacking that trusts nothing.

``pack(files)`` writes the same bytes for the same content, always: members sorted by path,
regular files only (directories are implied), mtime 0, uid/gid 0 with no owner names, mode 0644
(0755 for a file that was executable), a gzip header with no name and mtime 0. So an
artifact's archive, its sha256 and its fingerprint move together.

``unpack(data, into, limits)`` reads the archive as a stream and writes each member itself
(``tarfile.extractall`` is never called): a member whose path is absolute, holds ``..``, a
backslash or a NUL, or is not a regular file (symlink, hard link, device, FIFO, sparse) refuses
the whole archive, and so do too many files, a file or a total over its limit, and a gzip stream
that inflates past the total (a zip bomb is refused after reading at most the limit, not after
filling the disk). Files land under ``into`` only; on any refusal ``into`` is removed again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, cast

from pincer.config import HubSettings
from pincer.core.errors import ArchiveRefused, PayloadTooLarge
from pincer.hub.layout import CHUNK_BYTES

__all__ = ["ArchiveLimits", "PackedFile", "pack", "pack_folder", "unpack", "read_folder", "CHUNK_BYTES"]

_GZIP_LEVEL = 9


_HUB = HubSettings()  # [hub]'s defaults, written once in pincer.config


@dataclass(frozen=True, kw_only=True, slots=True)
class ArchiveLimits:
    """What one archive may hold (``[hub]`` max_archive_bytes, max_unpacked_bytes, max_files)."""

    max_archive_bytes: int = _HUB.max_archive_bytes
    max_unpacked_bytes: int = _HUB.max_unpacked_bytes
    max_files: int = _HUB.max_files
    max_file_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class PackedFile:
    data: bytes
    executable: bool = False


def pack(files: Mapping[str, PackedFile | bytes]) -> bytes:
    """The deterministic ``.tar.gz`` of ``files`` (posix path -> content)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            checked = _check_path(path)
            item = files[path]
            content = item if isinstance(item, bytes) else item.data
            executable = False if isinstance(item, bytes) else item.executable
            info = tarfile.TarInfo(checked)
            info.size = len(content)
            info.mtime = 0
            info.mode = 0o755 if executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(content))
    out = io.BytesIO()
    # filename="" and mtime=0: the gzip header carries neither a name nor a time.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=_GZIP_LEVEL) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def read_folder(folder: Path, *, limits: ArchiveLimits | None = None) -> dict[str, PackedFile]:
    """Every regular file under ``folder`` (hidden ones and ``__pycache__`` skipped) for ``pack``.
    A symlink, device or FIFO inside refuses the folder: what is published is what is there."""
    limits = limits or ArchiveLimits()
    folder = Path(folder)
    found: dict[str, PackedFile] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for dirname in dirnames:
            if os.path.islink(os.path.join(dirpath, dirname)):
                raise ArchiveRefused(
                    f"{os.path.join(dirpath, dirname)} is a symlink; an artifact holds regular files only",
                    hint="replace the link with the files it points to",
                )
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            full = Path(dirpath) / filename
            info = full.lstat()
            if not stat.S_ISREG(info.st_mode):
                raise ArchiveRefused(
                    f"{full} is not a regular file (a symlink, device or FIFO); an artifact holds regular files only",
                    hint="replace it with a plain file or remove it",
                )
            total += info.st_size
            if len(found) >= limits.max_files or total > limits.max_unpacked_bytes:
                raise PayloadTooLarge(
                    f"{folder} holds more than {limits.max_files} files or {limits.max_unpacked_bytes:,} bytes",
                    hint="raise [hub] max_files or max_unpacked_bytes, or publish less",
                )
            rel = full.relative_to(folder).as_posix()
            found[rel] = PackedFile(data=full.read_bytes(), executable=bool(info.st_mode & 0o111))
    return found


def pack_folder(folder: Path, *, limits: ArchiveLimits | None = None) -> bytes:
    return pack(read_folder(folder, limits=limits))


def _check_path(name: str) -> str:
    """A member path that stays inside the folder it is unpacked into, normalised; else refused."""
    if not name or "\x00" in name or "\\" in name:
        raise ArchiveRefused(f"archive member {name!r} has an unusable name", hint="the archive is broken or hostile")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveRefused(f"archive member {name!r} has an absolute path", hint="the archive is broken or hostile")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise ArchiveRefused(f"archive member {name!r} climbs out of the folder (..)", hint="the archive is broken or hostile")
    if any(len(p) > 255 for p in parts) or len(parts) > 32:
        raise ArchiveRefused(f"archive member {name[:80]!r}... has a path too long or too deep")
    return "/".join(parts)


class _Bounded(io.RawIOBase):
    """The inflated archive, read at most ``limit`` bytes far: a zip bomb stops here."""

    def __init__(self, source: IO[bytes], limit: int) -> None:
        self._source = source
        self._limit = limit
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        try:
            chunk = self._source.read(len(view))
        except (OSError, EOFError, zlib.error) as exc:
            raise ArchiveRefused(f"the archive is not a readable .tar.gz ({exc})", hint="download it again") from None
        self.read_bytes += len(chunk)
        if self.read_bytes > self._limit:
            raise ArchiveRefused(
                f"the archive inflates to more than {self._limit:,} bytes (a zip bomb?); nothing was installed",
                hint="raise [hub] max_unpacked_bytes only if this artifact is really that large",
            )
        view[: len(chunk)] = chunk
        return len(chunk)


def unpack(data: bytes, into: Path, *, limits: ArchiveLimits | None = None) -> dict[str, str]:
    """Unpack a ``.tar.gz`` into the new folder ``into``; returns path -> sha256 of every file.
    Raises ArchiveRefused / PayloadTooLarge, and then ``into`` does not exist."""
    limits = limits or ArchiveLimits()
    if len(data) > limits.max_archive_bytes:
        raise PayloadTooLarge(
            f"the archive is {len(data):,} bytes, over the limit of {limits.max_archive_bytes:,}",
            hint="raise [hub] max_archive_bytes only if this artifact is really that large",
        )
    into = Path(into)
    into.mkdir(mode=0o700)
    try:
        return _unpack(data, into, limits)
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise


def _unpack(data: bytes, into: Path, limits: ArchiveLimits) -> dict[str, str]:
    # The tar headers count too, so the inflated stream may exceed the files' total a little.
    overhead = 1024 * (limits.max_files + 16)
    bounded = _Bounded(cast("IO[bytes]", gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")), limits.max_unpacked_bytes + overhead)
    digests: dict[str, str] = {}
    total = 0
    try:
        tar = tarfile.open(fileobj=io.BufferedReader(bounded, CHUNK_BYTES), mode="r|")  # noqa: SIM115 - the with below closes it
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"the archive is not a readable .tar.gz ({exc})", hint="download it again") from None
    with tar:
        try:
            for member in tar:
                if member.isdir():
                    _check_path(member.name)
                    continue
                path = _check_path(member.name)
                if not member.isreg() or member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
                    what = _member_type(member)
                    raise ArchiveRefused(
                        f"archive member {member.name!r} is a {what}; an artifact holds regular files only",
                        hint="the archive is broken or hostile",
                    )
                if path in digests:
                    raise ArchiveRefused(f"archive member {path!r} appears twice", hint="the archive is broken or hostile")
                if len(digests) >= limits.max_files:
                    raise PayloadTooLarge(
                        f"the archive holds more than {limits.max_files} files", hint="raise [hub] max_files if it must"
                    )
                if member.size > limits.max_file_bytes or total + member.size > limits.max_unpacked_bytes:
                    raise ArchiveRefused(
                        f"the archive unpacks to more than {limits.max_unpacked_bytes:,} bytes (a zip bomb?); "
                        "nothing was installed",
                        hint="raise [hub] max_unpacked_bytes only if this artifact is really that large",
                    )
                target = into / path
                if any(_is_file(into / "/".join(path.split("/")[:n])) for n in range(1, path.count("/") + 1)):
                    raise ArchiveRefused(f"archive member {path!r} lies under a file of the same archive")
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                source = tar.extractfile(member)
                if source is None:  # pragma: no cover - isreg() members always have data
                    raise ArchiveRefused(f"archive member {path!r} has no data")
                digest = hashlib.sha256()
                written = 0
                mode = 0o755 if member.mode & 0o111 else 0o644
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
                with os.fdopen(fd, "wb") as out:
                    while chunk := source.read(CHUNK_BYTES):
                        written += len(chunk)
                        if written > member.size:
                            raise ArchiveRefused(f"archive member {path!r} is longer than its header says")
                        digest.update(chunk)
                        out.write(chunk)
                total += written
                digests[path] = digest.hexdigest()
        except tarfile.TarError as exc:
            raise ArchiveRefused(f"the archive is not a readable .tar.gz ({exc})", hint="download it again") from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ArchiveRefused(f"the archive is not a readable .tar.gz ({exc})", hint="download it again") from None
        except OSError as exc:  # a member whose path collides with another's (a file and a folder)
            raise ArchiveRefused(
                f"the archive cannot be unpacked: {exc.strerror or exc}", hint="the archive is broken or hostile"
            ) from None
    if not digests:
        raise ArchiveRefused("the archive holds no files", hint="the archive is broken or empty")
    return digests


def _is_file(path: Path) -> bool:
    return path.is_file()


def _member_type(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"symlink (to {member.linkname!r})"
    if member.islnk():
        return f"hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "FIFO"
    return f"member of type {member.type!r}"
