"""Dashboard sign-ins, in the store: every gateway of one store knows each of them.

One row per sign-in, keyed by the sha256 of its cookie (the cookie itself is never stored, so a
copy of the database signs nobody in), holding the sha256 of the gateway token that signed in
(removing the token from config.toml ends the sign-in at once), the sign-in's CSRF token and its
two clocks. The dashboard's rules for them (lifetime, idle time, how many are kept) live in
:mod:`pincer.gateway.ui.auth`; this is where they are kept.

Written once against the database seam (store/sql/), for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pincer.store.sql import Database, Sql

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


_ADD = Sql(
    "INSERT INTO ui_sign_ins (key, token_digest, csrf, created_at, last_used) "
    "VALUES (:key, :token_digest, :csrf, :created_at, :last_used)"
)
_GET = Sql("SELECT token_digest, csrf, created_at, last_used FROM ui_sign_ins WHERE key = :key")
_TOUCH = Sql("UPDATE ui_sign_ins SET last_used = :now WHERE key = :key AND last_used < :now")
_REMOVE = Sql("DELETE FROM ui_sign_ins WHERE key = :key")
_ENDED = Sql("DELETE FROM ui_sign_ins WHERE created_at < :created_before OR last_used < :used_before")
_BEYOND = Sql(
    "DELETE FROM ui_sign_ins WHERE key NOT IN (SELECT key FROM ui_sign_ins ORDER BY last_used DESC LIMIT :keep)"
)


class SignInStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, key: str, sign_in: SignIn) -> None:
        await self._db.execute(_ADD, {"key": key, "token_digest": sign_in.token_digest, "csrf": sign_in.csrf,
                                      "created_at": sign_in.created, "last_used": sign_in.last_used})  # fmt: skip

    async def get(self, key: str) -> SignIn | None:
        row = await self._db.fetch_one(_GET, {"key": key})
        if row is None:
            return None
        digest, csrf, created, last_used = row
        return SignIn(token_digest=digest, csrf=csrf, created=float(created), last_used=float(last_used))

    async def touch(self, key: str, now: float) -> None:
        await self._db.execute(_TOUCH, {"now": now, "key": key})

    async def remove(self, key: str) -> None:
        await self._db.execute(_REMOVE, {"key": key})

    async def prune(self, *, created_before: float, used_before: float, keep: int) -> None:
        """Forget the sign-ins that have ended, and all but the ``keep`` most recently used."""
        async with self._db.transaction() as tx:
            tx.add(_ENDED, {"created_before": created_before, "used_before": used_before})
            tx.add(_BEYOND, {"keep": keep})
