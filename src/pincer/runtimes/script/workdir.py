"""Per-run scratch directories: the only place a sandboxed command can write besides declared mounts."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from pincer.core.errors import ConfigError

__all__ = ["new_workdir", "remove_workdir", "traversable_by", "blocking_directory"]


def traversable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether ``uid`` can reach ``path`` through every directory above it (mode bits only)."""
    return blocking_directory(path, uid, gid) is None


def blocking_directory(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory from the root down that ``uid`` cannot pass through on the way to (and
    into) ``path``, or None when nothing blocks it (mode bits only)."""
    for parent in [*reversed(path.parents), path]:
        try:
            st = parent.stat()
        except OSError:
            return parent
        if not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return parent
    return None


def new_workdir(root: Path, *, uid: int, gid: int) -> Path:
    """A fresh private directory under ``root`` owned by the sandbox uid."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        # Others may pass through (the sandbox uid must) but not list the runs.
        os.chmod(root, 0o711)
        path = Path(tempfile.mkdtemp(prefix="run-", dir=root))
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
    except OSError as exc:
        raise ConfigError(f"cannot create a scratch directory under {root}: {exc}", hint="set scratch_root") from exc
    if os.geteuid() == 0 and not traversable_by(path, uid, gid):
        remove_workdir(path)
        raise ConfigError(
            f"the sandbox uid {uid} cannot reach {root}",
            hint="choose a scratch_root whose parent directories are world-executable (e.g. under /tmp)",
        )
    return path


def remove_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
