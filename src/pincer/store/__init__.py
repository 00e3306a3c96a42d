"""State: the audit chain, approvals, grants, idempotency, runs, triggers and sign-ins, each one
store written once over the database seam (store/sql/: SQLite under PINCER_HOME, or PostgreSQL)."""

from pincer.store.approvals import Answer, ApprovalRequest, ApprovalStatus, ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog, AuditRecord
from pincer.store.grants import GrantStore
from pincer.store.idempotency import IdempotencyStore

__all__ = [
    "Answer",
    "ApprovalRequest",
    "ApprovalStatus",
    "ApprovalStore",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "GrantStore",
    "IdempotencyStore",
]
