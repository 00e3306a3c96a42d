"""Dashboard sign-ins, in the store: every gateway of one store knows each of them.

One row per sign-in, keyed by the sha256 of its cookie (the cookie itself is never stored, so a
copy of the database signs nobody in), holding the sha256 of the gateway token that signed in
(removing the token from config.toml ends the sign-in at once), the sign-in's CSRF token and its
two clocks. The dashboard's rules for them (lifetime, idle time, how many are kept) live in
:mod:`pincer.gateway.ui.auth`; this is where they are kept.

Plain SQL both databases read alike, so the one class serves SQLite (pincer.db) and PostgreSQL
(through :class:`pincer.store.pg.portable.PortableConnection`), as the approval and run stores do.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any

from pincer.core.errors import StoreError

__all__ = ["SignIn", "SignInStore", "sign_in_key"]


def sign_in_key(cookie: str) -> str:
    """The row key of a sign-in cookie."""
    return hashlib.sha256(cookie.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class SignIn:
    token_digest: str  # sha256 of the gateway token that signed in
    csrf: str
    created: float
    last_used: float


class SignInStore:
    def __init__(self, conn: Any) -> None:
        self._conn = conn  # sqlite3.Connection, or the PostgreSQL PortableConnection

    def add(self, key: str, sign_in: SignIn) -> None:
        self._execute(
            "INSERT INTO ui_sign_ins (key, token_digest, csrf, created_at, last_used) VALUES (?, ?, ?, ?, ?)",
            (key, sign_in.token_digest, sign_in.csrf, sign_in.created, sign_in.last_used),
        )

    def get(self, key: str) -> SignIn | None:
        row = self._execute(
            "SELECT token_digest, csrf, created_at, last_used FROM ui_sign_ins WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        digest, csrf, created, last_used = row
        return SignIn(token_digest=digest, csrf=csrf, created=float(created), last_used=float(last_used))

    def touch(self, key: str, now: float) -> None:
        self._execute("UPDATE ui_sign_ins SET last_used = ? WHERE key = ? AND last_used < ?", (now, key, now))

    def remove(self, key: str) -> None:
        self._execute("DELETE FROM ui_sign_ins WHERE key = ?", (key,))

    def prune(self, *, created_before: float, used_before: float, keep: int) -> None:
        """Forget the sign-ins that have ended, and all but the ``keep`` most recently used."""
        self._execute("DELETE FROM ui_sign_ins WHERE created_at < ? OR last_used < ?", (created_before, used_before))
        self._execute(
            "DELETE FROM ui_sign_ins WHERE key NOT IN (SELECT key FROM ui_sign_ins ORDER BY last_used DESC LIMIT ?)",
            (keep,),
        )

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(
                f"the dashboard's sign-ins could not be read or written: {exc}",
                hint="check that PINCER_HOME is writable; `pincer doctor` checks the database",
            ) from exc
