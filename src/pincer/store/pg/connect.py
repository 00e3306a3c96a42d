"""Connecting to PostgreSQL: the url as configured, its password from outside it, two pools.

The password never sits in config.toml: ``[store] password_secret`` names a secret in the secret
store, else libpq reads ``PGPASSFILE`` (or ~/.pgpass) itself. A password written into the url
anyway still works, but every url this module puts into a log line or an error is redacted.

Two pools over the same database: an async one for what waits (the audit log's group commit,
LISTEN for approval answers), a sync one for the short statements the stores' synchronous
methods make from the event-loop thread, as the SQLite stores do (store/db.py says why).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pincer.core.errors import StoreError
from pincer.core.extras import require

logger = logging.getLogger(__name__)

__all__ = ["PgPools", "redact_url", "store_unreachable", "CONNECT_TIMEOUT_S", "POOL_WAIT_TIMEOUT_S"]

CONNECT_TIMEOUT_S = 10
POOL_WAIT_TIMEOUT_S = 30.0

_USERINFO = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^@/?#]*)@", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(r"(?i)([?&]password=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` with any password in it (``user:pw@`` or ``?password=``) replaced by ``***``."""
    match = _USERINFO.match(url)
    if match is not None:
        user, has_password, _ = match["userinfo"].partition(":")
        userinfo = f"{user}:***" if has_password else user
        url = f"{match['scheme']}{userinfo}@{url[match.end():]}"
    return _PASSWORD_PARAM.sub(r"\1***", url)


def store_unreachable(url: str, exc: BaseException) -> StoreError:
    # libpq's messages can quote the conninfo; only its first line, redacted, is shown.
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreError(
        f"cannot reach the PostgreSQL store {redact_url(url)}: {redact_url(first_line)}",
        hint="check [store] url in config.toml, that the server runs, and the password "
        "([store] password_secret names a secret; or PGPASSFILE)",
    )


class PgPools:
    """The sync pool, opened at once (its opening checks the server answers), and the async
    pool, opened on first use inside the event loop that uses it."""

    def __init__(self, url: str, *, kwargs: dict[str, Any], size: int, sync: Any) -> None:
        self.url = url  # as configured; only ever shown through redact_url
        self.sync = sync  # psycopg_pool.ConnectionPool
        self._kwargs = kwargs
        self._size = size
        self._aio: Any = None  # psycopg_pool.AsyncConnectionPool

    @property
    def shown_url(self) -> str:
        return redact_url(self.url)

    @classmethod
    def open(cls, url: str, *, password: str | None = None, size: int = 8) -> PgPools:
        """Open the sync pool and check that the server answers (StoreError, redacted, if not)."""
        psycopg = require("postgres", "psycopg")
        ConnectionPool = require("postgres", "psycopg_pool").ConnectionPool

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if password is not None:
            kwargs["password"] = password
        try:
            # One plain connection first: a refusal is reported at once, with libpq's reason
            # (the pool would retry until its timeout and say only that it timed out).
            psycopg.connect(url, **kwargs).close()
        except psycopg.Error as exc:
            raise store_unreachable(url, exc) from None
        sync = ConnectionPool(
            url, min_size=1, max_size=size, kwargs=kwargs, open=False, timeout=POOL_WAIT_TIMEOUT_S, name="pincer-sync"
        )
        try:
            sync.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - psycopg.Error, or the pool's PoolTimeout
            sync.close()
            raise store_unreachable(url, exc) from None
        return cls(url, kwargs=kwargs, size=size, sync=sync)

    async def aio(self) -> Any:
        """The async pool (psycopg_pool.AsyncConnectionPool), opened on first use."""
        if self._aio is None:
            AsyncConnectionPool = require("postgres", "psycopg_pool").AsyncConnectionPool

            pool = AsyncConnectionPool(
                self.url, min_size=1, max_size=self._size, kwargs=self._kwargs, open=False,
                timeout=POOL_WAIT_TIMEOUT_S, name="pincer-async",
            )  # fmt: skip
            try:
                await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - psycopg.Error, or the pool's PoolTimeout
                await pool.close()
                raise store_unreachable(self.url, exc) from None
            self._aio = pool
        return self._aio

    def connect_kwargs(self) -> dict[str, Any]:
        """What a dedicated connection (a LISTEN) is opened with: the pools' own settings."""
        return dict(self._kwargs)

    def close(self) -> None:
        """Close the sync pool (the async one needs :meth:`aclose`)."""
        self.sync.close()

    async def aclose(self) -> None:
        self.sync.close()
        if self._aio is not None:
            await self._aio.close()
