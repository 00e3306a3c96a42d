"""Small JSON settings files under PINCER_HOME (MCP servers, pins, OpenAPI services).

Writes are atomic: a temporary file in the same directory, fsync, ``os.replace``, fsync of the
directory, so a crash leaves the old file or the new one, never half of either. Read-modify-write
cycles hold an exclusive ``flock`` on a sidecar ``.lock`` file, so ``pincer mcp add`` beside a
running gateway cannot lose the gateway's pin update or the other way round. When the home's
registry is shared through ``[store] url`` (store/home_share.py), the cycle also holds the
store's lock on the file, reads its newest shared copy first and publishes the write at the end,
so the gateways of other machines cannot lose it either.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pincer.core.errors import ConfigError, StoreError

logger = logging.getLogger(__name__)

__all__ = [
    "read_json", "write_bytes_atomic", "write_json_atomic", "locked", "flocked", "set_shared_write", "MAX_JSON_FILE_BYTES",
]  # fmt: skip

MAX_JSON_FILE_BYTES = 16 * 1024 * 1024
# Set by store/home_share.py once a home of this process shares its registry ([store] url):
# wraps each read-modify-write of :func:`locked` (it decides which paths are shared).
_shared_write: Callable[[Path], contextlib.AbstractContextManager[None]] | None = None


def set_shared_write(hook: Callable[[Path], contextlib.AbstractContextManager[None]] | None) -> None:
    global _shared_write
    _shared_write = hook


def read_json(path: Path, *, default: Any = None) -> Any:
    """The parsed file, or ``default`` when it does not exist. A file that is not JSON is a
    ConfigError naming it and the line."""
    try:
        if path.stat().st_size > MAX_JSON_FILE_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_JSON_FILE_BYTES} bytes", hint="is this the right file?")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint="fix the file or remove it and add the entries again",
        ) from None


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably: temp file beside it, fsync,
    rename, fsync of the directory. A crash leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write {path}: {exc.strerror}", hint="check the permissions of PINCER_HOME") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def write_json_atomic(path: Path, data: Any, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` as indented JSON, atomically."""
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for one read-modify-write of ``path`` (and, for a shared registry
    file, the store's lock on it too: :func:`pincer.store.home_share.shared_write`)."""
    hook = _shared_write
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with flocked(path.with_name(path.name + ".lock")):
        with hook(path) if hook is not None else contextlib.nullcontext():
            yield


@contextlib.contextmanager
def flocked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (a lock file of its own, created 0600, never
    opened through a symlink) for the block; its directory must exist. Closing the file lets go."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
