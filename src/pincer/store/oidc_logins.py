"""Single sign-on logins begun and not yet finished, in the store: a login begun on one gateway
finishes on any gateway of the store (a load balancer may send the provider's callback to
another one).

One row per login, keyed by the sha256 of its ``state`` (the state itself, which the browser
carries, is never stored), holding the nonce and the PKCE verifier the callback needs, where to
go after, and when it began. A login is taken once: of two callbacks with one state, on one
gateway or two, only the one whose DELETE removed the row goes on.

Written once against the database seam (store/sql/), for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pincer.store.sql import Database, Sql

__all__ = ["PendingLogin", "OidcLoginStore"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingLogin:
    provider: str
    nonce: str
    verifier: str
    next_path: str
    created: float

    def __repr__(self) -> str:  # the nonce and verifier never reach a log through a repr
        return f"PendingLogin(provider={self.provider!r}, created={self.created!r})"


def _key(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()


_ADD = Sql(
    "INSERT INTO oidc_logins (key, provider, nonce, verifier, next_path, created_at) "
    "VALUES (:key, :provider, :nonce, :verifier, :next_path, :created_at)"
)
_GET = Sql("SELECT provider, nonce, verifier, next_path, created_at FROM oidc_logins WHERE key = :key")
_TAKE = Sql("DELETE FROM oidc_logins WHERE key = :key")
_ENDED = Sql("DELETE FROM oidc_logins WHERE created_at < :before")


class OidcLoginStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, state: str, login: PendingLogin, *, forget_before: float) -> None:
        async with self._db.transaction() as tx:
            tx.add(_ENDED, {"before": forget_before})
            tx.add(_ADD, {"key": _key(state), "provider": login.provider, "nonce": login.nonce, "verifier": login.verifier,
                          "next_path": login.next_path, "created_at": login.created})  # fmt: skip

    async def take(self, state: str) -> PendingLogin | None:
        """The login ``state`` began, once (None: never begun, or taken already)."""
        key = _key(state)
        async with self._db.transaction() as tx:
            row = await tx.fetch_one(_GET, {"key": key})
            if row is None or await tx.execute(_TAKE, {"key": key}) != 1:
                return None
        provider, nonce, verifier, next_path, created = row
        return PendingLogin(provider=provider, nonce=nonce, verifier=verifier, next_path=next_path, created=float(created))
