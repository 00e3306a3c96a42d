"""The store seam: what the callers need of each kind of state, as small Protocols.

Every store is written once over the database seam (store/sql/: SQLite under $PINCER_HOME, the
default, one machine; PostgreSQL, several gateways on one database, chosen by ``[store] url``),
so each Protocol has one implementation; callers hold the Protocol, which says how little they
use. The approval, run and trigger stores are used whole by their callers, so their Protocols
are the classes themselves. The registry's files under PINCER_HOME have their own seam,
``SharedHomeBackend`` in store/home_share.py: the local one shares nothing (one machine reads
the files themselves), the store's one (store/home_files.py) shares them with the homes of other
machines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pincer.policy.grants import Grant
from pincer.store.approvals import ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog, AuditRecord, ChainHead, UnitAfter, UnitBefore
from pincer.store.checkpoint import AuditCheckpoint
from pincer.store.grants import GrantStore
from pincer.store.home_share import LocalHome, SharedHomeBackend
from pincer.store.idempotency import IdempotencyStore
from pincer.store.runs import RunStore
from pincer.store.triggers import TriggerStore

__all__ = [
    "AuditStore", "GrantBackend", "IdempotencyBackend", "ApprovalStore", "RunStore", "TriggerStore", "SharedHomeBackend",
]  # fmt: skip


class AuditStore(Protocol):
    """One hash-chained record per call (store/audit.py states the chain's rules)."""

    @property
    def key_id(self) -> str: ...

    @property
    def queue_depth(self) -> int: ...

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int: ...

    async def append_with(
        self, entries: Sequence[AuditEntry], *, before: UnitBefore | None = None, after: UnitAfter | None = None,
        gather: bool | None = True,
    ) -> list[int]: ...  # fmt: skip

    async def records(
        self,
        *,
        tool: str | None = None,
        session: str | None = None,
        limit: int | None = None,
        after_id: int = 0,
        run_id: str | None = None,
    ) -> list[AuditRecord]: ...

    async def timestamps(self, tool: str, since: float) -> list[float]: ...

    async def grant_uses(self, grant_id: str) -> int: ...

    async def verify(self) -> int: ...

    async def verify_chain(self, *, check_head: bool = True) -> ChainHead: ...

    async def checkpoint(self) -> AuditCheckpoint: ...

    async def verify_checkpoint(self, checkpoint: AuditCheckpoint) -> ChainHead: ...


class GrantBackend(Protocol):
    """Grants stored by ``allow always`` answers; another process's show within a fraction of a second."""

    async def add(self, grant: Grant) -> None: ...

    async def remove(self, grant_id: str) -> bool: ...

    async def all(self) -> tuple[Grant, ...]: ...


class IdempotencyBackend(Protocol):
    """Stored results by (session, tool, key); ``claim`` folds concurrent duplicates into one run."""

    ttl_s: float
    max_entries: int

    async def lookup(self, session: str, tool: str, key: str, digest: str) -> dict[str, Any] | None: ...

    async def claim(self, session: str, tool: str, key: str) -> bool: ...

    async def release(self, session: str, tool: str, key: str) -> None: ...

    async def store(self, session: str, tool: str, key: str, digest: str, result: dict[str, Any]) -> None: ...


def _conforms(
    audit: AuditLog, grants: GrantStore, idempotency: IdempotencyStore, home: LocalHome
) -> tuple[AuditStore, GrantBackend, IdempotencyBackend, SharedHomeBackend]:
    """Never called: mypy checks here that the stores keep the seam's contract."""
    return audit, grants, idempotency, home
