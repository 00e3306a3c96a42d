"""File access confined to one workspace directory: the one way every tool reads a file of the
workspace (the file built-ins, Slack's and Telegram's uploads, the browser's upload, a WASM tool's
``workspace_read``) and the file built-ins write one.

A path is accepted only when it is relative, has no ``..`` component, and, once every symlink
is resolved, still lies inside the (resolved) workspace root. Symlinks that stay inside are
fine. To close the gap between that check and the open (a directory swapped for a symlink in
between), the resolved path is then walked from an fd of the root one component at a time with
``O_NOFOLLOW``: any symlink met on that walk means the tree changed under us, and we refuse.

The workspace is a place, not a set of names. A symlink is one way to give a file from elsewhere
a name in it; a hard link is another, and it cannot be seen from the name: ``ln
$PINCER_HOME/secret.key workspace/report.txt`` is a regular file inside the workspace. So the
file opened is checked through its descriptor (``fstat``, no window after the open):

- a regular file with more than one name (``st_nlink > 1``) is refused. Where the other names
  are cannot be known without searching every filesystem, and any of them may be outside: the
  rule refuses the few files hard-linked on purpose inside the workspace too (copy them: ``cp``,
  not ``ln``). A directory cannot be hard-linked; a new name made after the open cannot reach
  bytes already read.
- pincer's own files are refused whatever they are called and however many names they have: a
  file with the device and inode of a regular file at the top of PINCER_HOME (the keys, the
  secret store, the databases and their journals, config.toml, the gateway token) or of
  ``hub/trust.json``. That catches the one name of a key in a workspace that holds PINCER_HOME,
  and a bind mount, where ``st_nlink`` is 1.
- when the workspace holds PINCER_HOME (``[workspace] path`` a user's home, PINCER_HOME its
  ``.pincer``), no path into PINCER_HOME is read, listed or written: besides the keys, its
  ``tools/`` and ``skills/`` are what pincer runs.

Writes go to a temporary file in the target directory and are renamed over the target, so a
reader sees the old content or the new, never a torn file, and a failed write leaves nothing.
A target with a second name is therefore replaced, never written through: the workspace's name
gets the new file, the other name keeps its bytes. One of pincer's own files is refused.
All functions block; the tools call them from a worker thread.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pincer.core.errors import Denied, ToolError, UsageError
from pincer.core.values import HostContext

__all__ = [
    "WorkspacePath",
    "resolve_path",
    "read_bytes",
    "read_in_workspace",
    "write_bytes_atomic",
    "list_entries",
    "pincer_files_in",
    "DirEntry",
    "MAX_PATH_CHARS",
]

MAX_PATH_CHARS = 4096
MAX_SEARCHED_ENTRIES = 200_000  # pincer_files_in: a workspace larger than this is not searched whole
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_HINT_RELATIVE = "use a path relative to the workspace, e.g. notes/today.md"


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkspacePath:
    """A checked path: ``parts`` lead from the resolved ``root`` to the resolved target."""

    root: str
    parts: tuple[str, ...]
    shown: str  # the caller's path, normalised, for messages and results
    home: str | None = None  # resolved PINCER_HOME, whose own files are refused

    @property
    def absolute(self) -> str:
        return os.path.join(self.root, *self.parts)


@dataclass(frozen=True, kw_only=True, slots=True)
class DirEntry:
    name: str
    type: str  # file | dir | symlink | other
    size: int | None


def resolve_path(
    workspace: Path | None, path: object, *, home: Path | None, allow_root: bool = False
) -> WorkspacePath:
    """Check ``path`` against the rules above; raises Denied (escape), UsageError (malformed).
    ``home``: PINCER_HOME (the call's ``host.home``), or None where no home is known."""
    if workspace is None:
        raise Denied(
            "no workspace is configured for this call, so file tools are disabled",
            hint="set [workspace] path in config.toml",
        )
    if not isinstance(path, str):
        raise UsageError(f"the path must be a string, got {type(path).__name__}", hint=_HINT_RELATIVE)
    if "\x00" in path:
        raise UsageError("the path contains a NUL character", hint=_HINT_RELATIVE)
    if len(path) > MAX_PATH_CHARS:
        raise UsageError(f"the path is longer than {MAX_PATH_CHARS} characters", hint=_HINT_RELATIVE)
    if path.startswith(("/", "~")) or os.path.isabs(path):
        raise Denied(f"absolute path {path!r} refused (rule: paths stay inside the workspace)", hint=_HINT_RELATIVE)
    pieces = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in pieces:
        raise Denied(
            f"path {path!r} refused: '..' is not allowed (rule: paths stay inside the workspace)", hint=_HINT_RELATIVE
        )
    if not pieces and not allow_root:
        raise UsageError("the path names the workspace itself, not a file", hint=_HINT_RELATIVE)
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in pieces):
        raise UsageError("a path component is longer than 255 bytes", hint=_HINT_RELATIVE)
    try:
        root = os.path.realpath(workspace, strict=True)
    except OSError:
        raise ToolError(
            f"the workspace {str(workspace)!r} does not exist", hint="create it or fix [workspace] path"
        ) from None
    resolved = os.path.realpath(os.path.join(root, *pieces))
    if resolved != root and not resolved.startswith(root + os.sep):
        raise Denied(
            f"path {path!r} refused: it resolves outside the workspace through a symlink "
            "(rule: paths stay inside the workspace)",
            hint="use paths whose symlinks point inside the workspace",
        )
    home_real = os.path.realpath(home) if home is not None else None
    if home_real is not None and _within(resolved, home_real) and not _within(root, home_real, strictly=True):
        raise Denied(
            f"path {path!r} refused: it is in PINCER_HOME ({home_real}), pincer's own keys, secrets, databases and "
            "tools, which this workspace holds (rule: the workspace never reaches pincer's own files)",
            hint="set [workspace] path to a folder that does not hold PINCER_HOME",
        )
    parts = tuple(p for p in os.path.relpath(resolved, root).split(os.sep) if p not in ("", "."))
    return WorkspacePath(root=root, parts=parts, shown="/".join(pieces) or ".", home=home_real)


def _within(path: str, folder: str, *, strictly: bool = False) -> bool:
    return path.startswith(folder + os.sep) or (not strictly and path == folder)


def _own_files(home: str) -> dict[tuple[int, int], str]:
    """(device, inode) -> name of pincer's own files: each regular file at the top of ``home``
    (a link there counted by what it points to) and ``hub/trust.json``."""
    found: dict[tuple[int, int], str] = {}
    try:
        entries = [entry.name for entry in os.scandir(home)]
    except OSError:
        return found
    for name in [*entries, os.path.join("hub", "trust.json")]:
        try:
            info = os.stat(os.path.join(home, name))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found[(info.st_dev, info.st_ino)] = name
    return found


def pincer_files_in(workspace: Path, home: Path) -> list[str]:
    """Where pincer's own files can be read in ``workspace`` by something that sees it whole (a
    sandbox that mounts it: script tools with ``[sandbox] use_workspace``), each as a sentence;
    [] when nowhere. PINCER_HOME when the workspace holds it; else each name in it of one of
    pincer's own files, searched for only when one of those has a second name (st_nlink > 1:
    usually none has, and the workspace is not walked)."""
    root, home_real = os.path.realpath(workspace), os.path.realpath(home)
    if _within(home_real, root):
        return [f"the workspace holds PINCER_HOME ({home_real})"]
    own = _own_files(home_real)
    linked = {key: name for key, name in own.items() if _nlink(os.path.join(home_real, name)) > 1}
    if not linked:
        return []
    found: list[str] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):  # symlinks not followed
        seen += len(dirnames) + len(filenames)
        if seen > MAX_SEARCHED_ENTRIES:
            return [f"PINCER_HOME's {', '.join(sorted(linked.values()))} has another name, and the workspace has more "
                    f"than {MAX_SEARCHED_ENTRIES} entries to search for it"]  # fmt: skip
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in linked:
                found.append(f"{os.path.relpath(path, root)} is PINCER_HOME's {linked[(info.st_dev, info.st_ino)]}")
    return found


def _nlink(path: str) -> int:
    try:
        return os.stat(path).st_nlink
    except OSError:
        return 1


def _refuse_other_names(target: WorkspacePath, info: os.stat_result, *, writing: bool) -> None:
    """Denied when the file behind ``info`` is one of pincer's own, or (reading) has another name."""
    if not stat.S_ISREG(info.st_mode):
        return
    own = _own_files(target.home).get((info.st_dev, info.st_ino)) if target.home is not None else None
    if own is not None:
        raise Denied(
            f"{target.shown!r} refused: it is PINCER_HOME's {own}, pincer's own file, under another name (a hard "
            "link or a mount) (rule: no tool reads or writes pincer's keys, secrets or databases)",
            hint=f"remove {target.shown!r} from the workspace (rm); a copy of a key is a leaked key",
        )
    if info.st_nlink > 1 and not writing:
        raise Denied(
            f"{target.shown!r} refused: the file has {info.st_nlink} names (hard links), and another may be outside "
            "the workspace (rule: the workspace is a place, not a set of names)",
            hint=f"put a copy in the workspace instead of a link (cp FILE {target.shown}, not ln), then try again",
        )


@contextmanager
def _open_dir(target: WorkspacePath, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """An fd of the directory ``root/parts`` reached without following any symlink."""
    fd = os.open(target.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                next_fd = _open_child_dir(fd, part, create=create)
            except OSError as exc:
                raise _walk_error(target, exc) from None
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def _open_child_dir(fd: int, name: str, *, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:
        # Linux reports a symlink met with O_DIRECTORY|O_NOFOLLOW as ENOTDIR; tell the two apart.
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "symlink in the path") from None
        raise
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, 0o755, dir_fd=fd)
    except FileExistsError:
        pass  # made concurrently: open it like any other
    return os.open(name, _DIR_FLAGS, dir_fd=fd)


def _walk_error(target: WorkspacePath, exc: OSError) -> Exception:
    if exc.errno == errno.ENOENT:
        return ToolError(f"no such file or directory: {target.shown!r}", hint="check the path with list_dir")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return Denied(
            f"path {target.shown!r} refused: a symlink appeared while it was being opened",
            hint="retry; the workspace changed during the call",
        )
    if exc.errno == errno.ENOTDIR:
        return ToolError(
            f"{target.shown!r}: a part of the path is not a directory", hint="check the path with list_dir"
        )
    if exc.errno == errno.EACCES:
        return ToolError(f"{target.shown!r}: permission denied", hint="check the file's permissions")
    return ToolError(f"{target.shown!r}: {exc.strerror or exc}", hint="check the path with list_dir")


def _require_file_path(target: WorkspacePath) -> None:
    if not target.parts:
        raise ToolError(f"{target.shown!r} is the workspace directory itself", hint="name a file inside it")


def read_bytes(target: WorkspacePath, *, offset: int, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes from ``offset`` of a regular file; returns (data, file size)."""
    _require_file_path(target)
    with _open_dir(target, target.parts[:-1]) as dir_fd:
        try:
            # O_NONBLOCK: opening a FIFO must not hang the call; it is refused below anyway.
            fd = os.open(target.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError as exc:
            raise _walk_error(target, exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{target.shown!r} is a directory", hint="use list_dir for directories")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{target.shown!r} is not a regular file", hint="only regular files can be read")
        _refuse_other_names(target, info, writing=False)
        os.lseek(fd, offset, os.SEEK_SET)
        chunks: list[bytes] = []
        remaining = limit
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), info.st_size
    finally:
        os.close(fd)


def read_in_workspace(
    host: HostContext, path: object, *, offset: int = 0, limit: int, prefixes: tuple[str, ...] = ()
) -> tuple[WorkspacePath, bytes, int]:
    """The one opener of a workspace file for a tool: the path checked against the call's
    workspace and PINCER_HOME (and, given ``prefixes``, the file found under one of them, as a
    WASM tool's ``workspace.allowed_prefixes``), up to ``limit`` bytes from ``offset`` read under
    every rule above; (the checked path, the bytes, the file's size)."""
    target = resolve_path(host.workspace, path, home=host.home)
    found = "/".join(target.parts)
    if prefixes and not any(not p.strip("/") or f"{found}/".startswith(p.strip("/") + "/") for p in prefixes):
        raise Denied(f"{target.shown!r} refused: it is outside the tool's workspace prefixes {list(prefixes)}",
                     hint="read a file under one of the prefixes of the tool's capabilities file")  # fmt: skip
    data, size = read_bytes(target, offset=offset, limit=limit)
    return target, data, size


def write_bytes_atomic(target: WorkspacePath, data: bytes, *, make_dirs: bool) -> None:
    """Replace (or create) the file with ``data``: temp file in the same directory, then rename."""
    _require_file_path(target)
    name = target.parts[-1]
    with _open_dir(target, target.parts[:-1], create=make_dirs) as dir_fd:
        mode = 0o644
        try:
            existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None:
            if stat.S_ISLNK(existing.st_mode):  # resolve_path followed every link: this one is new
                raise _walk_error(target, OSError(errno.ELOOP, "symlink in the path"))
            if stat.S_ISDIR(existing.st_mode):
                raise ToolError(f"{target.shown!r} is a directory", hint="write to a file path inside it")
            if not stat.S_ISREG(existing.st_mode):
                raise ToolError(f"{target.shown!r} exists and is not a regular file", hint="pick another path")
            # Another name is replaced below, never written through; pincer's own file is refused.
            _refuse_other_names(target, existing, writing=True)
            mode = stat.S_IMODE(existing.st_mode)
        temp = f".{name[:200]}.{secrets.token_hex(6)}.pincer-tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
        os.fsync(dir_fd)


def list_entries(target: WorkspacePath, *, limit: int) -> tuple[list[DirEntry], bool]:
    """Entries of a directory sorted by name, at most ``limit``; (entries, truncated)."""
    with _open_dir(target, target.parts) as dir_fd:
        names = sorted(os.listdir(dir_fd))
        entries = []
        for name in names[:limit]:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while we listed
            if stat.S_ISLNK(info.st_mode):
                entries.append(DirEntry(name=name, type="symlink", size=None))
            elif stat.S_ISDIR(info.st_mode):
                entries.append(DirEntry(name=name, type="dir", size=None))
            elif stat.S_ISREG(info.st_mode):
                entries.append(DirEntry(name=name, type="file", size=info.st_size))
            else:
                entries.append(DirEntry(name=name, type="other", size=None))
        return entries, len(names) > limit
