"""Embedded state (SQLite): audit chain, approvals, idempotency, grants."""

from pincer.store.approvals import Answer, ApprovalRequest, ApprovalStatus, ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog, AuditRecord
from pincer.store.db import open_database
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
    "open_database",
]
