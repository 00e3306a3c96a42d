"""A skill's files: listed with their size and ``sha256:`` digest, read safely by relative path.

What a skill ships is every regular file under its folder, except hidden entries, caches and
installed dependencies (``node_modules``, ``__pycache__``). Listings stay within the MCP skills
extension's per-skill limits (``MAX_SKILL_FILES`` files, ``MAX_SKILL_BYTES`` bytes); a skill
with more is listed up to the limit and marked truncated. Reads never leave the skill's folder:
no ``..``, no absolute paths, no symlink that points outside, and no file with a second hard
link (its other name may be ``config.toml``): such files are neither listed nor read.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pincer.core.errors import SkillNotFound, UsageError
from pincer.skills.model import Skill

__all__ = [
    "SkillFile", "FileListing", "list_files", "read_file", "is_shared_link", "MAX_SKILL_FILES", "MAX_SKILL_BYTES", "mime_type",
]  # fmt: skip

logger = logging.getLogger(__name__)
_BUNDLED_ROOT = os.path.realpath(Path(__file__).parent / "bundled")

_SKILL_MD = "SKILL.md"
MAX_SKILL_FILES = 512
MAX_SKILL_BYTES = 16 * 1024 * 1024
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", ".git", ".venv", "venv"})
_TEXT_TYPES = ("text/", "application/json", "application/toml", "application/x-sh", "application/javascript", "application/xml", "application/yaml")


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillFile:
    path: str  # relative, POSIX
    size: int
    digest: str  # "sha256:<hex>"

    @property
    def mime_type(self) -> str:
        return mime_type(self.path)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "digest": self.digest, "mimeType": self.mime_type}


@dataclass(frozen=True, kw_only=True, slots=True)
class FileListing:
    files: tuple[SkillFile, ...]
    truncated: bool = False


def mime_type(path: str) -> str:
    if path.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or ("text/plain" if "." not in PurePosixPath(path).name else "application/octet-stream")


def is_text(path: str) -> bool:
    kind = mime_type(path)
    return kind.startswith(_TEXT_TYPES) or kind.endswith(("+json", "+xml"))


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _digest(path: Path, st: os.stat_result) -> str:
    key = (str(path), st.st_mtime_ns, st.st_size)
    found = _DIGESTS.get(key)
    if found is None:
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
        found = "sha256:" + h.hexdigest()
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = found
    return found


def list_files(skill: Skill, *, max_files: int = MAX_SKILL_FILES, max_bytes: int = MAX_SKILL_BYTES) -> FileListing:
    """SKILL.md first, then the rest in path order, within the limits. A skill whose file is a
    ``skill.md`` lists it as ``SKILL.md``, the name the Agent Skills spec and MCP clients use."""
    base = skill.base_dir
    own = skill.path.name
    found: list[tuple[str, Path, os.stat_result]] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = Path(dirpath) / name
            try:
                st = full.stat()
                if full.is_symlink() and not _inside(base, full):
                    continue
            except OSError:
                continue
            if not os.path.isfile(full) or is_shared_link(full, st):
                continue
            rel = full.relative_to(base).as_posix()
            rel = _SKILL_MD if rel == own else rel
            found.append((rel, full, st))
        if len(found) > max_files * 4:
            break
    found.sort(key=lambda row: (row[0] != _SKILL_MD, row[0]))
    files: list[SkillFile] = []
    total = 0
    truncated = False
    for rel, full, st in found:
        if len(files) >= max_files or total + st.st_size > max_bytes:
            truncated = True
            break
        try:
            digest = _digest(full, st)
        except OSError:
            continue
        files.append(SkillFile(path=rel, size=st.st_size, digest=digest))
        total += st.st_size
    return FileListing(files=tuple(files), truncated=truncated)


def _inside(base: Path, path: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(base))
    except OSError:
        return False


def safe_relative(rel: str) -> str:
    """A relative POSIX path inside a skill, or UsageError."""
    if not rel or "\0" in rel or "\\" in rel or rel.startswith("/"):
        raise UsageError(f"{rel!r} is not a relative path inside the skill", hint="use a path such as references/guide.md")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts) or any(part.startswith(".") for part in parts):
        raise UsageError(f"{rel!r} is not a path inside the skill", hint="no '..', no hidden entries")
    return rel


def is_shared_link(path: Path | str, st: os.stat_result) -> bool:
    """A regular file with more than one hard link: its other name may be anywhere on the disk
    (``ln ~/.pincer/config.toml skill/notes.md``), so a skill's folder may not serve it. Files
    of pincer's own bundled skills are exempt: a package installer may hard-link them from its
    cache."""
    if st.st_nlink <= 1 or not stat.S_ISREG(st.st_mode):
        return False
    return not os.path.realpath(path).startswith(_BUNDLED_ROOT + os.sep)


def read_file(skill: Skill, rel: str, *, max_bytes: int = MAX_SKILL_BYTES) -> bytes:
    """The bytes of one of the skill's files: a regular file inside the skill's folder (a
    symlink only when it stays inside), with one link, read through the descriptor it was
    checked on."""
    rel = safe_relative(rel)
    path = skill.base_dir / (skill.path.name if rel == _SKILL_MD else rel)
    missing = SkillNotFound(f"skill {skill.name!r} has no file {rel!r}", hint=f"`pincer skills show {skill.name}` lists its files")
    if not _inside(skill.base_dir, path) or any(part in _SKIPPED_DIRS for part in rel.split("/")):
        raise missing
    try:
        real = os.path.realpath(path)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise missing
            if not _inside(skill.base_dir, Path(real)) or is_shared_link(real, st):
                logger.warning("skill %s: %s is a link out of its folder; not served", skill.name, rel)
                raise missing
            if st.st_size > max_bytes:
                raise UsageError(f"{rel} is {st.st_size:,} bytes, more than {max_bytes:,}", hint="skills hold small files")
            with os.fdopen(os.dup(fd), "rb") as handle:
                return handle.read(max_bytes + 1)[:max_bytes]
        finally:
            os.close(fd)
    except OSError:
        raise SkillNotFound(
            f"skill {skill.name!r} has no file {rel!r}", hint=f"`pincer skills show {skill.name}` lists its files"
        ) from None
