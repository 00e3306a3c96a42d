"""The store seam: what the call chain needs of each kind of state, as small Protocols.

Two implementations stand behind each: SQLite under $PINCER_HOME (store/audit.py, approvals.py,
grants.py, idempotency.py, runs.py; the default, one machine) and PostgreSQL (store/pg/, several
gateways on one database, chosen by ``[store] url``). Callers hold these types, never a backend.
The approval and run stores are one implementation over either connection (store/pg/portable.py),
so their Protocols are the classes themselves. The registry's files under PINCER_HOME have their
own seam, ``SharedHomeBackend`` in store/home_share.py: the local one shares nothing (one
machine reads the files themselves), the PostgreSQL one (store/pg/home_files.py) shares them
with the homes of other machines.
"""

from __future__ import annotations

from typing import Any, Protocol

from pincer.policy.grants import Grant
from pincer.store.approvals import ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog, AuditRecord, ChainHead
from pincer.store.checkpoint import AuditCheckpoint
from pincer.store.grants import GrantStore
from pincer.store.home_share import LocalHome, SharedHomeBackend
from pincer.store.idempotency import IdempotencyStore
from pincer.store.runs import RunStore

__all__ = ["AuditStore", "GrantBackend", "IdempotencyBackend", "ApprovalStore", "RunStore", "SharedHomeBackend"]



class AuditStore(Protocol):
    """One hash-chained record per call (store/audit.py states the chain's rules)."""

    @property
    def key_id(self) -> str: ...

    @property
    def queue_depth(self) -> int: ...

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int: ...

    def append_sync(self, entry: AuditEntry) -> int: ...

    def records(
        self,
        *,
        tool: str | None = None,
        session: str | None = None,
        limit: int | None = None,
        after_id: int = 0,
        run_id: str | None = None,
    ) -> list[AuditRecord]: ...

    def timestamps(self, tool: str, since: float) -> list[float]: ...

    def grant_uses(self, grant_id: str) -> int: ...

    def verify(self) -> int: ...

    def verify_chain(self, *, check_head: bool = True) -> ChainHead: ...

    def checkpoint(self) -> AuditCheckpoint: ...

    def verify_checkpoint(self, checkpoint: AuditCheckpoint) -> ChainHead: ...


class GrantBackend(Protocol):
    """Grants stored by ``allow always`` answers; another process's show within a fraction of a second."""

    def add(self, grant: Grant) -> None: ...

    def remove(self, grant_id: str) -> bool: ...

    def all(self) -> tuple[Grant, ...]: ...


class IdempotencyBackend(Protocol):
    """Stored results by (session, tool, key); ``claim`` folds concurrent duplicates into one run."""

    ttl_s: float
    max_entries: int

    def lookup(self, session: str, tool: str, key: str, digest: str) -> dict[str, Any] | None: ...

    async def claim(self, session: str, tool: str, key: str) -> bool: ...

    def release(self, session: str, tool: str, key: str) -> None: ...

    def store(self, session: str, tool: str, key: str, digest: str, result: dict[str, Any]) -> None: ...


def _conforms(
    audit: AuditLog, grants: GrantStore, idempotency: IdempotencyStore, home: LocalHome
) -> tuple[AuditStore, GrantBackend, IdempotencyBackend, SharedHomeBackend]:
    """Never called: mypy checks here that the SQLite stores keep the seam's contract."""
    return audit, grants, idempotency, home
