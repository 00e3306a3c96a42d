"""Skills fetched from an MCP server (``pincer skills pull``) in ``pincer.lock``.

A pulled skill is verified file by file against the server's digests and written to
``$PINCER_HOME/installed/skills/NAME``; from then on it is guarded like a hub install: its lock
entry holds the fingerprint of the folder as written (source ``mcp:URL``, unsigned), so
``pincer verify`` and every command that shows or runs it refuse it once it is edited on disk.
It has no kept version to reinstall from: ``pincer verify --fix`` leaves it alone and the
refusal says to pull it again.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pincer.hub.artifact import ArtifactKind, fingerprint
from pincer.hub.layout import hash_folder
from pincer.hub.lockfile import LOCK_FILENAME, LockEntry, Lockfile

__all__ = ["PULLED_PREFIX", "is_pulled", "lock_pulled_skill", "repull_hint"]

PULLED_PREFIX = "mcp:"


def is_pulled(entry: LockEntry) -> bool:
    return entry.source.startswith(PULLED_PREFIX)


def repull_hint(entry: LockEntry) -> str:
    return f"`pincer skills pull {entry.source.removeprefix(PULLED_PREFIX)} --name {entry.name}` fetches it again"


def lock_pulled_skill(home: Path, name: str, *, server: str, version: str | None, folder: Path) -> LockEntry:
    """Record the pulled skill in ``folder`` (already written) in the home's lock."""
    entry = LockEntry(
        kind=ArtifactKind.SKILL,
        name=name,
        version=version or "0.0.0",
        source=PULLED_PREFIX + server,
        fingerprint=fingerprint(hash_folder(folder)),
        allow_unsigned=True,  # the MCP server signs nothing; its digests were checked on the way in
    )
    # one lifecycle step at a time per home, as the installer does (an flock on the home folder)
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        Lockfile.read(Path(home) / LOCK_FILENAME).with_entry(entry).write()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    return entry
