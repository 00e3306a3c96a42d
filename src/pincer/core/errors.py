"""The one error tree of pincer.

Every error a user can see says what was wrong and what to do. Other libraries' exceptions are
translated at the seam (``raise PincerError(...) from exc``)::

    PincerError
    ├── UsageError                 the caller asked for something malformed
    │   ├── ToolNotFound
    │   ├── ArgumentsInvalid       args fail the tool's JSON Schema
    │   └── IdempotencyConflict    a key reused with different arguments
    ├── ConfigError                config.toml or another settings file is unusable
    ├── ManifestError              a capabilities or registry manifest is malformed
    ├── PolicyError                the call chain refused the call
    │   ├── Denied                 session policy or a grant says deny
    │   ├── ApprovalDenied         a person answered deny
    │   ├── ApprovalTimeout        nobody answered in time
    │   ├── BudgetExceeded         a rate limit or invocation budget is spent
    │   └── EgressDenied           a host, address or redirect outside the allowlist
    ├── SecretError                secret store: missing key, bad ciphertext, unknown name
    ├── ToolError                  the tool itself failed
    │   └── ToolTimeout
    ├── RuntimeUnavailable         a runtime cannot start here (missing binary, bad component)
    └── StoreError                 the embedded database failed
        └── AuditChainBroken       ``audit verify`` found a record that does not chain

Each class carries a stable ``code`` used in JSON output and an optional ``hint`` telling the
user what to do next.
"""

from __future__ import annotations

__all__ = [
    "PincerError",
    "UsageError",
    "ToolNotFound",
    "ArgumentsInvalid",
    "IdempotencyConflict",
    "ConfigError",
    "ManifestError",
    "PolicyError",
    "Denied",
    "ApprovalDenied",
    "ApprovalTimeout",
    "BudgetExceeded",
    "EgressDenied",
    "SecretError",
    "ToolError",
    "ToolTimeout",
    "RuntimeUnavailable",
    "StoreError",
    "AuditChainBroken",
]


class PincerError(Exception):
    """Base of every error pincer raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"code": self.code, "message": self.message}
        if self.hint:
            data["hint"] = self.hint
        return data


class UsageError(PincerError):
    code = "usage_error"


class ToolNotFound(UsageError):
    code = "tool_not_found"


class ArgumentsInvalid(UsageError):
    code = "invalid_arguments"


class IdempotencyConflict(UsageError):
    code = "idempotency_conflict"


class ConfigError(PincerError):
    code = "config_error"


class ManifestError(PincerError):
    """A manifest is malformed; the message names the file and the key."""

    code = "manifest_error"

    def __init__(self, message: str, *, source: str = "<manifest>", key: str = "", hint: str | None = None):
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + message, hint=hint)
        self.source = source
        self.key = key


class PolicyError(PincerError):
    code = "policy_error"


class Denied(PolicyError):
    code = "denied"


class ApprovalDenied(PolicyError):
    code = "approval_denied"


class ApprovalTimeout(PolicyError):
    code = "approval_timeout"


class BudgetExceeded(PolicyError):
    code = "budget_exceeded"

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or f"retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["retry_after_s"] = round(self.retry_after_s, 3)
        return data


class EgressDenied(PolicyError):
    code = "egress_denied"


class SecretError(PincerError):
    code = "secret_error"


class ToolError(PincerError):
    code = "tool_error"


class ToolTimeout(ToolError):
    code = "tool_timeout"


class RuntimeUnavailable(PincerError):
    code = "runtime_unavailable"


class StoreError(PincerError):
    code = "store_error"


class AuditChainBroken(StoreError):
    code = "audit_chain_broken"

    def __init__(self, message: str, *, record_id: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.record_id = record_id
