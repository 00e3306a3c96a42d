"""pincer's 32-byte keys: parsed from text, or kept in a file under ``home``.

Two keys live this way: the secret store's AES key (``home/secret.key`` or
``PINCER_SECRET_KEY``) and the audit chain's HMAC key (``home/audit.key`` or
``PINCER_AUDIT_KEY``, see :data:`AUDIT_KEY`). Library code never reads the environment: the
CLI passes the variable's value in as ``env_value``. A key file is created once, mode 0600,
and refused when group or others could read it. No message here ever contains key material.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from pincer.core.errors import SecretError

logger = logging.getLogger(__name__)

__all__ = [
    "KEY_BYTES",
    "KEY_FILE_NAME",
    "AUDIT_KEY",
    "SECRET_KEY",
    "KeyPlace",
    "parse_key",
    "load_or_create_key",
    "encode_key",
    "create_once",
]

KEY_BYTES = 32
KEY_FILE_NAME = "secret.key"


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyPlace:
    """Where one key is kept: a file under PINCER_HOME, or an environment variable."""

    file_name: str
    env_name: str
    purpose: str


SECRET_KEY = KeyPlace(file_name=KEY_FILE_NAME, env_name="PINCER_SECRET_KEY", purpose="secret key")
AUDIT_KEY = KeyPlace(file_name="audit.key", env_name="PINCER_AUDIT_KEY", purpose="audit key")
KEY_FILE_MODE = 0o600
_MAX_KEY_TEXT_CHARS = 256  # a key written as text is ~44-64 characters; anything longer is not one
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_GENERATE_HINT = (
    "give 32 random bytes as base64 or hex, e.g. "
    "python3 -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())'"
)


def encode_key(key: bytes) -> str:
    """The text form written to a key file: standard base64 of the 32 bytes."""
    return base64.b64encode(key).decode("ascii")


def parse_key(text: str, *, source: str) -> bytes:
    """32 key bytes from base64 (standard or url-safe, padding optional) or hex text.

    ``source`` names where the text came from (``PINCER_SECRET_KEY``, a path) for the error;
    the text itself is never repeated.
    """
    raw = text.strip()
    key = _decode(raw) if len(raw) <= _MAX_KEY_TEXT_CHARS else None
    if key is None or len(key) != KEY_BYTES:
        raise SecretError(f"{source} is not a {KEY_BYTES}-byte key written as base64 or hex", hint=_GENERATE_HINT)
    return key


def _decode(raw: str) -> bytes | None:
    if len(raw) == 2 * KEY_BYTES and set(raw) <= _HEX_DIGITS:
        return bytes.fromhex(raw)
    padded = raw + "=" * (-len(raw) % 4)
    altchars = b"-_" if ("-" in raw or "_" in raw) else None
    try:
        return base64.b64decode(padded, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        return None


def load_or_create_key(home: Path, env_value: str | None, *, place: KeyPlace = SECRET_KEY) -> bytes:
    """The key kept at ``place`` for ``home`` (by default the secret store's).

    ``env_value`` (the CLI's ``place.env_name``, e.g. ``PINCER_SECRET_KEY``) wins when set and
    non-empty; no file is written then. Otherwise ``home/<place.file_name>`` is read, or created
    atomically (a private temp file written and fsynced, then hard-linked into place so no
    reader ever sees half a key and two processes racing agree on one key).
    """
    if env_value is not None and env_value.strip():
        return parse_key(env_value, source=place.env_name)
    path = Path(home) / place.file_name
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        pass
    try:
        _create_key_file(path, place)
    except OSError as exc:
        raise SecretError(
            f"cannot create the key file {path}: {exc.strerror or exc}",
            hint=f"make PINCER_HOME a writable directory of yours, or set {place.env_name}",
        ) from None
    return _read_key_file(path)


def _read_key_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SecretError(
            f"cannot open the key file {path}: {exc.strerror}",
            hint="it must be a regular file (not a symlink) readable by you",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(
                f"the key file {path} is not a regular file", hint="remove it or point PINCER_HOME elsewhere"
            )
        if info.st_mode & 0o077:
            raise SecretError(
                f"the key file {path} is readable or writable by group or others "
                f"(mode {stat.S_IMODE(info.st_mode):04o}); refusing to use it",
                hint=f"chmod 600 {path}",
            )
        if info.st_uid != os.getuid():
            raise SecretError(
                f"the key file {path} belongs to another user", hint=f"chown it to yourself: chown $(id -u) {path}"
            )
        text = os.read(fd, _MAX_KEY_TEXT_CHARS + 1).decode("ascii", errors="replace")
    finally:
        os.close(fd)
    return parse_key(text, source=f"the key file {path}")


def _create_key_file(path: Path, place: KeyPlace) -> None:
    key_text = (encode_key(secrets.token_bytes(KEY_BYTES)) + "\n").encode("ascii")
    if create_once(path, key_text, mode=KEY_FILE_MODE):
        logger.info("created %s file %s", place.purpose, path)
    else:
        logger.debug("another process created %s first; using its key", path)


def create_once(path: Path, data: bytes, *, mode: int = KEY_FILE_MODE) -> bool:
    """Create ``path`` holding ``data`` unless it exists; never replace it (a key, or the audit
    log's anchor beside it). A private temp file is written and fsynced, then hard-linked into
    place, so no reader sees half of it and of two processes racing exactly one creates it.
    True when this call created it. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
        _fsync_dir(path.parent)
        return True
    finally:
        temp.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
