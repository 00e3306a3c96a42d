"""PostgreSQL backends of the store seam (store/seam.py), for several gateways on one database.

    stores = await PgStores.open(url, key=audit_key, ttl_s=300, max_entries=10_000)
    ... stores.audit, stores.approvals, stores.grants, stores.idempotency, stores.runs,
    ... stores.triggers, stores.home_files (the registry's files, store/home_share.py) ...
    await stores.aclose()

Opening checks the schema version and refuses an older one with a hint naming
``pincer db upgrade`` (store/pg/schema.py): gateways never migrate on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from pincer.core.extras import require
from pincer.store.anchor import AnchorFile
from pincer.store.home_share import SharedHomeBackend
from pincer.store.pg.approvals import PgApprovalStore
from pincer.store.pg.audit import PgAuditLog
from pincer.store.pg.connect import PgPools, redact_url
from pincer.store.pg.grants import PgGrantStore
from pincer.store.pg.home_files import PgHomeFiles
from pincer.store.pg.idempotency import PgIdempotencyStore
from pincer.store.pg.instances import PgInstances
from pincer.store.pg.portable import PortableConnection
from pincer.store.pg.schema import SCHEMA_VERSION, check_schema, upgrade
from pincer.store.pg.triggers import PgTriggerStore
from pincer.store.runs import RunStore
from pincer.store.seam import AuditStore, GrantBackend, IdempotencyBackend
from pincer.store.sign_ins import SignInStore

__all__ = ["PgStores", "upgrade_database", "redact_url", "SCHEMA_VERSION"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PgStores:
    pools: PgPools
    audit: PgAuditLog
    approvals: PgApprovalStore
    grants: PgGrantStore
    idempotency: PgIdempotencyStore
    runs: RunStore
    triggers: PgTriggerStore
    sign_ins: SignInStore
    instances: PgInstances
    home_files: PgHomeFiles

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        key: bytes,
        ttl_s: float,
        max_entries: int,
        password: str | None = None,
        pool_size: int = 8,
        host: str | None = None,
        anchor: AnchorFile | None = None,
    ) -> PgStores:
        """``host``: the machine's name in owner tokens (``[store] host_id``; the host name by
        default): gateways with another host are read as on another machine. ``anchor``: this
        home's anchor of the shared audit log (store/anchor.py)."""
        pools = PgPools.open(url, password=password, size=pool_size)
        try:
            with pools.sync.connection() as conn:
                check_schema(conn, pools.shown_url)
            instances = PgInstances(pools, host=host)
            owners = instances.owners
            audit = PgAuditLog(pools, key=key, anchor=anchor)
            stores = cls(
                pools=pools,
                audit=audit,
                approvals=PgApprovalStore(pools, owners=owners, audit=audit),
                grants=PgGrantStore(pools),
                idempotency=PgIdempotencyStore(pools, ttl_s=ttl_s, max_entries=max_entries, owners=owners),
                runs=RunStore(cast(Any, PortableConnection(pools)), owners=owners),
                triggers=PgTriggerStore(pools, owners=owners, instances=instances),
                sign_ins=SignInStore(PortableConnection(pools)),
                instances=instances,
                home_files=PgHomeFiles(pools),
            )
            instances.start()
            return stores
        except BaseException:
            await pools.aclose()
            raise

    async def aclose(self) -> None:
        try:
            self.triggers.close()
            self.instances.stop()
        finally:
            await self.pools.aclose()


def upgrade_database(url: str, *, password: str | None = None) -> tuple[int, int]:
    """Bring the database at ``url`` to this pincer's schema; (version before, after)."""
    psycopg = require("postgres", "psycopg")

    from pincer.store.pg.connect import CONNECT_TIMEOUT_S, store_unreachable

    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
    if password is not None:
        kwargs["password"] = password
    try:
        conn = psycopg.connect(url, **kwargs)
    except psycopg.Error as exc:
        raise store_unreachable(url, exc) from None
    with conn:
        return upgrade(conn)


def _conforms(
    audit: PgAuditLog, grants: PgGrantStore, idempotency: PgIdempotencyStore, home_files: PgHomeFiles
) -> tuple[AuditStore, GrantBackend, IdempotencyBackend, SharedHomeBackend]:
    """Never called: mypy checks here that each PostgreSQL store keeps its seam's contract."""
    return audit, grants, idempotency, home_files
