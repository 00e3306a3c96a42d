"""The encrypted secret store: ``home/secrets.db``, one AES-256-GCM ciphertext per name.

Each value is sealed with a fresh random 96-bit nonce and the secret's name as associated
data, so a ciphertext copied onto another name's row fails to open. A keyed check value in the
``meta`` table tells a wrong key (every secret unreadable) apart from one altered row. Names,
dates and the change counter are plaintext; values never leave this module except through
``get``/``find``/``values``, and no message here ever contains one.

    store = SecretStore.open(home, key=load_or_create_key(home, os.environ.get("PINCER_SECRET_KEY")))
    store.set("GITHUB_TOKEN", token)
    store.get("GITHUB_TOKEN")

A secret declared per person (``[secrets] per_person`` in config.toml, docs/teams.md) keeps one
value per person in ``person_secrets``, sealed the same way with the person's name and the
secret's name as associated data: a row copied onto another person (or a shared name) fails to
open. ``values`` holds them too, so the leak scanner redacts every person's token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pincer.core.errors import SecretError, StoreError, UsageError
from pincer.secrets.access import SecretAccess
from pincer.secrets.keys import KEY_BYTES, load_or_create_key, parse_key
from pincer.store.open_lock import open_lock

logger = logging.getLogger(__name__)

__all__ = [
    "SecretStore",
    "SecretInfo",
    "PersonSecretInfo",
    "SecretAccess",
    "load_or_create_key",
    "parse_key",
    "validate_name",
    "SECRETS_DB_NAME",
    "MAX_SECRET_BYTES",
    "VERSION_POLL_INTERVAL_S",
]

SECRETS_DB_NAME = "secrets.db"
MAX_SECRET_BYTES = 65_536
BUSY_TIMEOUT_S = 5.0
# Another process's change (``pincer secrets set`` beside a running gateway) shows in
# ``version()`` within this long; this process's own changes show at once. Reading the counter
# costs ~10 us, too much for every call of the hot path.
VERSION_POLL_INTERVAL_S = 1.0
NONCE_BYTES = 12

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_AAD_PREFIX = b"pincer-secret-v1\x00"
_KEY_CHECK_LABEL = b"pincer secret store key check v1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value
);
CREATE TABLE IF NOT EXISTS person_secrets (
    person TEXT NOT NULL,
    name TEXT NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (person, name)
);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', 1), ('generation', 0);
"""
_WRONG_KEY_HINT = "set PINCER_SECRET_KEY (or home/secret.key) to the key this store was created with"


@dataclass(frozen=True, kw_only=True, slots=True)
class SecretInfo:
    """What may be shown of a secret: its name and when it was set (unix seconds)."""

    name: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class PersonSecretInfo:
    """What may be shown of one person's value of a per-person secret."""

    person: str
    name: str
    created_at: float
    updated_at: float


def validate_name(name: object) -> str:
    """``name`` if it is 1-128 of ``A-Z a-z 0-9 _ . -``; else UsageError."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)[:60] if isinstance(name, str) else type(name).__name__
        raise UsageError(
            f"invalid secret name {shown}",
            hint="use 1-128 characters of letters, digits, '_', '.', '-' (e.g. GITHUB_TOKEN)",
        )
    return name


def _aad(name: str, person: str | None = None) -> bytes:
    # A person's value: the NUL bytes cannot occur in a name, so no shared name's data is one of these.
    if person is not None:
        return _AAD_PREFIX + b"person\x00" + person.encode("ascii") + b"\x00" + name.encode("ascii")
    return _AAD_PREFIX + name.encode("ascii")


def _check_person(person: object) -> str:
    # The people store's names (store/people.py); checked here too so that no odd text reaches the AAD.
    from pincer.store.people import check_person_name

    if not isinstance(person, str):
        raise UsageError("a person's name must be text", hint="see the names with `pincer people list`")
    return check_person_name(person)


class SecretStore:
    """Secrets of one PINCER_HOME. Thread-safe; one SQLite connection behind a lock."""

    def __init__(self, *, conn: sqlite3.Connection, key: bytes, path: Path) -> None:
        self._conn = conn
        self._aead = AESGCM(key)
        self._path = path
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._key_matches = self._check_key(key)
        self._generation = self._read_generation()
        self._generation_read_at = time.monotonic()

    @classmethod
    def open(cls, home: Path, *, key: bytes | None = None) -> SecretStore:
        """Open (creating when absent) ``home/secrets.db``.

        ``key`` is the 32-byte store key; ``None`` means ``home/secret.key`` (created if missing).
        A key that differs from the one the store was created with does not fail here: ``names``
        and ``delete`` still work, and everything that needs a value raises SecretError.
        """
        home = Path(home)
        if key is None:
            key = load_or_create_key(home, None)
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise SecretError(
                f"the secret store key must be {KEY_BYTES} bytes", hint="pass the bytes load_or_create_key returns"
            )
        path = home / SECRETS_DB_NAME
        try:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Created private before SQLite opens it; SQLite gives -wal and -shm the same mode.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the secret store {path}: {exc}", hint="check PINCER_HOME") from None
        try:
            with open_lock(path):  # a new file's switch to WAL, one process at a time (store/open_lock.py)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.executescript(_SCHEMA)
            return cls(conn=conn, key=key, path=path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"the secret store {path} is unreadable: {exc}", hint="restore it from a backup") from None
        except OSError as exc:
            conn.close()
            raise StoreError(f"cannot open the secret store {path}: {exc.strerror or exc}", hint="check PINCER_HOME") from None
        except BaseException:
            conn.close()
            raise

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SecretStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SecretStore({str(self._path)!r})"

    # -- change tracking -----------------------------------------------------------------

    def version(self) -> int:
        """A counter that moves whenever a secret is set or deleted (see VERSION_POLL_INTERVAL_S)."""
        now = time.monotonic()
        if now - self._generation_read_at >= VERSION_POLL_INTERVAL_S:
            generation = self._read_generation()
            self._generation, self._generation_read_at = generation, now
        return self._generation

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after each change made through this object; returns unsubscribe."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    # -- reading -------------------------------------------------------------------------

    def names(self) -> list[SecretInfo]:
        """Every secret's name and dates, sorted by name. Never needs the key."""
        rows = self._query("SELECT name, created_at, updated_at FROM secrets ORDER BY name")
        return [SecretInfo(name=n, created_at=c, updated_at=u) for n, c, u in rows]

    def get(self, name: str) -> str:
        """The value of ``name``; SecretError naming it when there is none."""
        value = self.find(name)
        if value is None:
            raise SecretError(f"no secret named {name!r}", hint=f"set it with: pincer secrets set {name}")
        return value

    def find(self, name: str) -> str | None:
        """The value of ``name``, or None when it is not set."""
        validate_name(name)
        self._require_key()
        rows = self._query("SELECT nonce, ciphertext FROM secrets WHERE name = ?", (name,))
        return self._open(name, *rows[0]) if rows else None

    def values(self) -> list[str]:
        """Every value, every person's included, for the leak scanner."""
        self._require_key()
        rows = self._query("SELECT name, nonce, ciphertext FROM secrets ORDER BY name")
        shared = [self._open(name, nonce, ciphertext) for name, nonce, ciphertext in rows]
        mine = self._query("SELECT person, name, nonce, ciphertext FROM person_secrets ORDER BY person, name")
        return shared + [self._open(name, nonce, ciphertext, person=person) for person, name, nonce, ciphertext in mine]

    def person_names(self, person: str | None = None) -> list[PersonSecretInfo]:
        """Each person's values of per-person secrets (names and dates), sorted; one person's when given."""
        where, params = ("WHERE person = ?", (_check_person(person),)) if person is not None else ("", ())
        rows = self._query(
            f"SELECT person, name, created_at, updated_at FROM person_secrets {where} ORDER BY person, name", params
        )
        return [PersonSecretInfo(person=p, name=n, created_at=c, updated_at=u) for p, n, c, u in rows]

    def find_for(self, person: str, name: str) -> str | None:
        """``person``'s value of the per-person secret ``name``, or None when they have none."""
        validate_name(name)
        _check_person(person)
        self._require_key()
        rows = self._query(
            "SELECT nonce, ciphertext FROM person_secrets WHERE person = ? AND name = ?", (person, name)
        )
        return self._open(name, *rows[0], person=person) if rows else None

    # -- writing -------------------------------------------------------------------------

    def set(self, name: str, value: str) -> None:
        """Store ``value`` under ``name``, replacing any earlier one. All or nothing."""
        validate_name(name)
        data = self._checked_value(name, value)
        self._require_key()
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = self._aead.encrypt(nonce, data, _aad(name))
        now = time.time()
        self._write(
            "INSERT INTO secrets (name, nonce, ciphertext, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, "
            "updated_at = excluded.updated_at",
            (name, nonce, ciphertext, now, now),
        )

    def set_for(self, person: str, name: str, value: str) -> None:
        """Store ``person``'s own value of the per-person secret ``name``. All or nothing."""
        validate_name(name)
        _check_person(person)
        data = self._checked_value(name, value)
        self._require_key()
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = self._aead.encrypt(nonce, data, _aad(name, person))
        now = time.time()
        self._write(
            "INSERT INTO person_secrets (person, name, nonce, ciphertext, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (person, name) DO UPDATE SET nonce = excluded.nonce, "
            "ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            (person, name, nonce, ciphertext, now, now),
        )

    def delete_for(self, person: str, name: str | None = None) -> int:
        """Remove ``person``'s value of ``name``, or every value of theirs when ``name`` is None;
        returns how many went. A named value that is not there is a SecretError naming it."""
        _check_person(person)
        if name is None:
            return self._write("DELETE FROM person_secrets WHERE person = ?", (person,))
        validate_name(name)
        if not self._write("DELETE FROM person_secrets WHERE person = ? AND name = ?", (person, name)):
            raise SecretError(f"{person} has no value of secret {name!r}",
                              hint="see the names with: pincer secrets list")  # fmt: skip
        return 1

    def delete(self, name: str) -> None:
        """Remove ``name``; SecretError naming it when there is none."""
        validate_name(name)
        if not self._write("DELETE FROM secrets WHERE name = ?", (name,)):
            raise SecretError(f"no secret named {name!r}", hint="see the names with: pincer secrets list")

    # -- internals -----------------------------------------------------------------------

    @staticmethod
    def _checked_value(name: str, value: object) -> bytes:
        if not isinstance(value, str) or not value:
            raise UsageError(f"the value of secret {name!r} must be a non-empty string")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"the value of secret {name!r} is not valid Unicode text") from None
        if len(data) > MAX_SECRET_BYTES:
            raise UsageError(f"the value of secret {name!r} is longer than {MAX_SECRET_BYTES} bytes")
        return data

    def _open(self, name: str, nonce: bytes, ciphertext: bytes, *, person: str | None = None) -> str:
        try:
            return self._aead.decrypt(nonce, ciphertext, _aad(name, person)).decode("utf-8")
        except (InvalidTag, ValueError, UnicodeDecodeError):
            whose = f"{person}'s value of secret {name!r}" if person else f"secret {name!r}"
            again = f"pincer secrets set {name}" + (f" --person {person}" if person else "")
            raise SecretError(
                f"{whose} does not decrypt: the key is wrong for it, or its row was altered "
                "or copied from another name",
                hint=f"set it again with: {again}",
            ) from None

    def _require_key(self) -> None:
        if not self._key_matches:
            raise SecretError(
                f"the secret key is wrong: it is not the key {self._path} was created with", hint=_WRONG_KEY_HINT
            )

    def _check_key(self, key: bytes) -> bool:
        check = hmac.new(key, _KEY_CHECK_LABEL, hashlib.sha256).digest()
        with self._lock:
            try:
                self._conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('key_check', ?)", (check,))
                row = self._conn.execute("SELECT value FROM meta WHERE key = 'key_check'").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the secret store {self._path}: {exc}") from None
        stored = row[0] if row else None
        return isinstance(stored, bytes) and hmac.compare_digest(stored, check)

    def _read_generation(self) -> int:
        rows = self._query("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the secret store {self._path}: {exc}") from None

    def _write(self, sql: str, params: tuple[object, ...]) -> int:
        """Run one change and bump the generation in one transaction; returns rows changed."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    changed = self._conn.execute(sql, params).rowcount
                    if changed:
                        self._conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
                    generation = self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write the secret store {self._path}: {exc}") from None
            self._generation, self._generation_read_at = int(generation[0]), time.monotonic()
        if changed:
            self._notify()
        return changed

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                logger.exception("a secret store listener failed")
