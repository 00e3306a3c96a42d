"""The one error tree of pincer.

Every error a user can see says what was wrong and what to do. Other libraries' exceptions are
translated at the seam (``raise PincerError(...) from exc``)::

    PincerError                    500
    ├── UsageError                 400  the caller asked for something malformed
    │   ├── ToolNotFound           404
    │   ├── ArgumentsInvalid       422  args fail the tool's JSON Schema
    │   ├── IdempotencyConflict    409  a key reused with different arguments
    │   ├── UnsupportedMediaType   415  a request body that is not JSON
    │   ├── ClientCapabilityMissing 400 the tool needs a client capability (sampling, ...) the client lacks
    │   ├── SkillNotFound          404  no loaded skill has that name
    │   ├── RunNotFound            404  no agent run has that id
    │   ├── IdempotencyKeyRequired 428  [idempotency] required: a side-effecting call came without a key
    │   ├── ArtifactNotFound       404  no catalog source has that artifact, version or tag
    │   ├── AmbiguousKey           409  a bare name that several kinds or sources answer to
    │   ├── VersionExists          409  a published version is immutable
    │   ├── Unauthorized           401  the hub server got no valid publisher token
    │   ├── PayloadTooLarge        413  a request body, an upload or a download over its size limit
    │   ├── CommandNotFound        404  no skill declares that /command
    │   ├── JobNotFound            404  no scheduled job has that name
    │   ├── HookNotFound           404  no webhook has that name
    │   ├── MethodNotAllowed       405  a webhook takes POST only
    │   ├── ScheduleInvalid        422  a cron expression, time zone, time or interval that does not parse
    │   ├── CredentialInQuery      400  a token or signature sent in the query string
    │   ├── DeliveryMalformed      400  a webhook delivery's headers cannot be read as one delivery
    │   ├── StaleRef               409  a browser element ref not in the page's last snapshot
    │   ├── CanvasChanged          409  a canvas event from a rendering the canvas no longer keeps, or not from a rendered control
    │   └── A2uiInvalid            422  an A2UI message that fails its version's schema (names message, field, rule)
    ├── ConfigError                503  config.toml or another settings file is unusable
    │   └── HookSecretMissing      503  a webhook's secret is not in the secret store
    ├── ManifestError              422  a capabilities or registry manifest is malformed
    │   ├── DefinitionRefused      422  an MCP server's tool definition holds a secret (or another refusal)
    │   └── SkillError             422  a SKILL.md that cannot be loaded, or a skill that cannot render
    ├── PolicyError                403  the call chain refused the call
    │   ├── Denied                 403  session policy or a grant says deny
    │   ├── ApprovalDenied         403  a person answered deny
    │   ├── ApprovalTimeout        408  nobody answered in time
    │   ├── ApprovalGone           410  the approval a caller came back for no longer waits
    │   ├── ApprovalAnswered       409  the approval was answered already
    │   ├── ApprovalPending        428  asked, not answered yet; call again after the answer
    │   ├── BudgetExceeded         429  a rate limit or invocation budget is spent
    │   ├── TooManyTasks           429  a session holds [tasks] max_live_per_session unfinished MCP tasks
    │   ├── SignatureInvalid       401  a webhook delivery whose token, signature or timestamp does not hold
    │   ├── OAuthCallbackRefused   403  an OAuth redirect whose state does not match the one sent (forged) or
    │   │                               that carries the provider's error instead of a code
    │   ├── TooManyFailures        429  an address that failed webhook authentication too often
    │   └── EgressDenied           403  a host, address or redirect outside the allowlist
    ├── InputRequired              409  the tool needs answers from an MCP client first
    ├── ArtifactRefused            422  an artifact the hub will not install or publish
    │   ├── IntegrityMismatch      409  a sha256 or fingerprint differs from the one promised or locked
    │   ├── SignatureRefused       403  unsigned, a signature that does not verify, or a signer not trusted
    │   ├── ArchiveRefused         400  an archive with unsafe members (traversal, links, devices) or a bomb
    │   ├── ScanBlocked            451  the install-time scanner found a high-severity finding
    │   ├── LocalEdits             412  installed files were edited on disk; an update would overwrite them
    │   └── BuildRefused           422  pincer build: a plan asking for what no build may have (financial, wildcards)
    │       └── ToolNameTaken      409  pincer build: a tool of that name exists (--edit NAME or --replace replaces it)
    ├── BuildFailed                422  pincer build: no iteration passed its checks and tests
    ├── HubUnavailable             502  a catalog source or hub server cannot be reached, or answered nonsense
    ├── SecretError                500  secret store: missing key, bad ciphertext, unknown name
    ├── ToolError                  502  the tool itself failed
    │   ├── ToolTimeout            504
    │   ├── ApiRateLimited         429  an external API (GitHub, Brave) rate-limits the tool; says when it resets
    │   ├── ReauthRequired         401  an OAuth login is gone (invalid_grant, revoked): names the command to reconnect
    │   └── ApiRefused             502  an external API answered a failure in its own terms (Slack's ok: false)
    ├── ProviderError              502  the model provider (an LLM API) failed
    │   ├── ProviderAuthFailed     502  it refused the API key
    │   ├── ModelNotFound          502  it does not know the model
    │   ├── ContextTooLong         502  the conversation is longer than the model takes
    │   ├── ProviderAnswerInvalid  502  a 200 answer that is not the API's shape (HTML, null, a list)
    │   ├── ModelOutputTooLarge    502  one turn's text or tool arguments past what max_output_tokens allows
    │   ├── ProviderRateLimited    429  it rate-limits us (retried with backoff first)
    │   └── ProviderUnavailable    503  5xx, a dropped connection or stream, a timeout (retried first)
    ├── RuntimeUnavailable         503  a runtime cannot start here (missing binary, bad component)
    │   └── ExtraMissing           503  an optional part whose extra is not installed (names `pip install 'pincer[NAME]'`)
    └── StoreError                 500  the embedded database failed
        ├── AuditChainBroken       409  ``audit verify`` found a record that does not chain
        ├── CheckpointInvalid      422  an audit checkpoint is malformed or not signed by this key
        ├── SchemaBehind           503  the shared store is not at this pincer's schema yet (``pincer db upgrade``)
        └── StoreConflict          409  a guarded write found its row changed by another writer first

Each class carries a stable ``code`` used in JSON output, the ``http_status`` the REST API
answers it with (so a new error cannot fall through to a generic 500), and an optional ``hint``
telling the user what to do next. :func:`error_class` maps a code back to its class.
"""

from __future__ import annotations

__all__ = [
    "PincerError",
    "UsageError",
    "ToolNotFound",
    "ArgumentsInvalid",
    "IdempotencyConflict",
    "CheckpointInvalid",
    "UnsupportedMediaType",
    "ConfigError",
    "ManifestError",
    "DefinitionRefused",
    "PolicyError",
    "Denied",
    "TooManyTasks",
    "ApprovalDenied",
    "ApprovalTimeout",
    "BudgetExceeded",
    "EgressDenied",
    "SecretError",
    "BuildRefused",
    "BuildFailed",
    "ToolNameTaken",
    "ToolError",
    "ToolTimeout",
    "ApiRateLimited",
    "ReauthRequired",
    "OAuthCallbackRefused",
    "ApiRefused",
    "RuntimeUnavailable",
    "ExtraMissing",
    "StoreError",
    "AuditChainBroken",
    "SchemaBehind",
    "StoreConflict",
    "ApprovalGone",
    "ApprovalAnswered",
    "ApprovalPending",
    "InputRequired",
    "ClientCapabilityMissing",
    "SkillError",
    "SkillNotFound",
    "RunNotFound",
    "IdempotencyKeyRequired",
    "ProviderError",
    "ProviderAuthFailed",
    "ModelNotFound",
    "ContextTooLong",
    "ProviderAnswerInvalid",
    "ModelOutputTooLarge",
    "ProviderRateLimited",
    "ProviderUnavailable",
    "ArtifactNotFound",
    "AmbiguousKey",
    "VersionExists",
    "Unauthorized",
    "PayloadTooLarge",
    "ArtifactRefused",
    "IntegrityMismatch",
    "SignatureRefused",
    "ArchiveRefused",
    "ScanBlocked",
    "LocalEdits",
    "HubUnavailable",
    "CommandNotFound",
    "JobNotFound",
    "HookNotFound",
    "MethodNotAllowed",
    "ScheduleInvalid",
    "CredentialInQuery",
    "DeliveryMalformed",
    "StaleRef",
    "A2uiInvalid",
    "CanvasChanged",
    "HookSecretMissing",
    "SignatureInvalid",
    "TooManyFailures",
    "error_class",
    "http_status",
]


class PincerError(Exception):
    """Base of every error pincer raises on purpose."""

    code = "error"
    http_status = 500

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
    http_status = 400


class ToolNotFound(UsageError):
    code = "tool_not_found"
    http_status = 404


class ArgumentsInvalid(UsageError):
    code = "invalid_arguments"
    http_status = 422


class IdempotencyConflict(UsageError):
    code = "idempotency_conflict"
    http_status = 409


class UnsupportedMediaType(UsageError):
    """A REST request body that is not JSON, whatever its content-type said."""

    code = "unsupported_media_type"
    http_status = 415


class ConfigError(PincerError):
    code = "config_error"
    http_status = 503


class ManifestError(PincerError):
    """A manifest is malformed; the message names the file and the key."""

    code = "manifest_error"
    http_status = 422

    def __init__(self, message: str, *, source: str = "<manifest>", key: str = "", hint: str | None = None):
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + message, hint=hint)
        self.source = source
        self.key = key


class DefinitionRefused(ManifestError):
    """A tool definition pincer will not list or pin (it holds a secret, or takes a name a
    trusted tool holds); the message names the server and the tool, never the secret."""

    code = "definition_refused"
    http_status = 422



class SkillError(ManifestError):
    """A SKILL.md that cannot be loaded (the message names the file and the line), or a skill
    whose template or parameters cannot be rendered."""

    code = "skill_error"
    http_status = 422

    def __init__(
        self, message: str, *, source: str = "SKILL.md", line: int | None = None, key: str = "", hint: str | None = None
    ) -> None:
        where = f"{source}:{line}" if line else source
        super().__init__(message, source=where, key=key, hint=hint)
        self.line = line
        self.path = source
        self.detail = message  # the message without the file and line in front


class SkillNotFound(UsageError):
    code = "skill_not_found"
    http_status = 404


class RunNotFound(UsageError):
    code = "run_not_found"
    http_status = 404


class IdempotencyKeyRequired(UsageError):
    """``[idempotency] required = true`` and a side-effecting call came without a key."""

    code = "idempotency_key_required"
    http_status = 428


class ArtifactNotFound(UsageError):
    code = "artifact_not_found"
    http_status = 404


class AmbiguousKey(UsageError):
    """A bare name several kinds (or sources) answer to; the message lists the candidates."""

    code = "ambiguous_key"
    http_status = 409


class VersionExists(UsageError):
    code = "version_exists"
    http_status = 409


class Unauthorized(UsageError):
    code = "unauthorized"
    http_status = 401


class PayloadTooLarge(UsageError):
    """A request body, an upload or a download over its size limit (read no further)."""

    code = "body_too_large"
    http_status = 413


class CommandNotFound(UsageError):
    """A ``/NAME`` no eligible skill declares; the message lists the known commands."""

    code = "command_not_found"
    http_status = 404


class JobNotFound(UsageError):
    code = "job_not_found"
    http_status = 404


class HookNotFound(UsageError):
    code = "hook_not_found"
    http_status = 404


class MethodNotAllowed(UsageError):
    code = "method_not_allowed"
    http_status = 405


class ScheduleInvalid(UsageError):
    code = "schedule_invalid"
    http_status = 422


class CredentialInQuery(UsageError):
    """A credential in a URL's query string: URLs end up in proxy and access logs."""

    code = "credential_in_query"
    http_status = 400


class DeliveryMalformed(UsageError):
    """A webhook delivery that cannot be read as one delivery: an authentication header sent
    twice (two readers could each see a different one), a timestamp that is not Unix seconds."""

    code = "delivery_malformed"
    http_status = 400


class StaleRef(UsageError):
    """A browser action named an element ref that the tab's last snapshot does not have (the
    page changed, navigated, or the ref was never shown): snapshot again."""

    code = "stale_ref"
    http_status = 409


class CanvasChanged(UsageError):
    """A canvas event names a rendering the canvas no longer keeps, or a control that rendering
    does not have: the page was older than the canvas (or the event was not a rendered control's)."""

    code = "canvas_changed"
    http_status = 409


class A2uiInvalid(UsageError):
    """An A2UI message (v0.8 or v0.9) that is not one its version's published schema allows:
    the message names which message (its index), the field (a JSON pointer) and the rule."""

    code = "a2ui_invalid"
    http_status = 422


class HookSecretMissing(ConfigError):
    """A webhook names a secret the store does not hold: it refuses every delivery until set."""

    code = "hook_secret_missing"
    http_status = 503


class PolicyError(PincerError):
    code = "policy_error"
    http_status = 403


class Denied(PolicyError):
    code = "denied"
    http_status = 403


class ApprovalDenied(PolicyError):
    code = "approval_denied"
    http_status = 403


class ApprovalTimeout(PolicyError):
    code = "approval_timeout"
    http_status = 408


class BudgetExceeded(PolicyError):
    code = "budget_exceeded"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or f"retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["retry_after_s"] = round(self.retry_after_s, 3)
        return data


class TooManyTasks(PolicyError):
    """A session holds ``[tasks] max_live_per_session`` unfinished MCP tasks already."""

    code = "too_many_tasks"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or f"retry in {max(1, round(retry_after_s))} s")
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["retry_after_s"] = round(self.retry_after_s, 3)
        return data


class SignatureInvalid(PolicyError):
    """A webhook delivery that failed authentication (token, signature or timestamp)."""

    code = "signature_invalid"
    http_status = 401


class TooManyFailures(PolicyError):
    """Too many failed webhook deliveries from one address within a minute."""

    code = "too_many_failures"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or f"retry in {max(1, round(retry_after_s))} s")
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["retry_after_s"] = round(self.retry_after_s, 3)
        return data


class EgressDenied(PolicyError):
    code = "egress_denied"
    http_status = 403


class SecretError(PincerError):
    code = "secret_error"
    http_status = 500


class ToolError(PincerError):
    code = "tool_error"
    http_status = 502


class ToolTimeout(ToolError):
    code = "tool_timeout"
    http_status = 504


class ApiRateLimited(ToolError):
    """An external API a built-in tool calls answered with its rate limit; the message names the
    reset time when the API gave one."""

    code = "api_rate_limited"
    http_status = 429


class ReauthRequired(ToolError):
    """An OAuth provider refused the stored login (``invalid_grant``, a revoked or expired
    refresh token, no login at all): the person must reconnect; never retried in a loop."""

    code = "reauth_required"
    http_status = 401


class OAuthCallbackRefused(PolicyError):
    """An OAuth redirect refused: its ``state`` is not the one this flow sent (a forged or
    replayed redirect), or it carries the provider's ``error`` instead of a code."""

    code = "oauth_callback_refused"
    http_status = 403
    declined = False  # True: the provider's own error (the person declined), not a forged redirect
class ApiRefused(ToolError):
    """An external API answered that the call failed, in its own terms (Slack's HTTP 200 with
    ``ok: false``); ``api_code`` is the API's own error code (``channel_not_found``)."""

    code = "api_refused"
    http_status = 502

    def __init__(self, message: str, *, api_code: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.api_code = api_code

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "api_code": self.api_code}


class ProviderError(PincerError):
    """The model provider failed. ``retryable``: the same request may succeed later (the agent
    loop retries those with backoff); ``retry_after_s``: what the provider asked us to wait."""

    code = "provider_error"
    http_status = 502
    retryable = False

    def __init__(
        self, message: str, *, hint: str | None = None, retry_after_s: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s
        self.status = status

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        if self.status is not None:
            data["status"] = self.status
        if self.retry_after_s is not None:
            data["retry_after_s"] = round(self.retry_after_s, 3)
        return data


class ProviderAuthFailed(ProviderError):
    code = "provider_auth_failed"


class ModelNotFound(ProviderError):
    code = "model_not_found"


class ContextTooLong(ProviderError):
    code = "context_too_long"


class ProviderAnswerInvalid(ProviderError):
    code = "provider_answer_invalid"


class ModelOutputTooLarge(ProviderError):
    code = "model_output_too_large"


class ProviderRateLimited(ProviderError):
    code = "provider_rate_limited"
    http_status = 429
    retryable = True


class ProviderUnavailable(ProviderError):
    code = "provider_unavailable"
    http_status = 503
    retryable = True


class RuntimeUnavailable(PincerError):
    code = "runtime_unavailable"
    http_status = 503


class ExtraMissing(RuntimeUnavailable):
    """An optional part (core/extras.py) whose packages are not installed; the hint installs them."""

    code = "extra_missing"
    http_status = 503


class StoreError(PincerError):
    code = "store_error"
    http_status = 500


class AuditChainBroken(StoreError):
    code = "audit_chain_broken"
    http_status = 409

    def __init__(self, message: str, *, record_id: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.record_id = record_id


class SchemaBehind(StoreError):
    """The shared (PostgreSQL) store has no pincer schema yet, or an older one: nothing can be
    written to it until ``pincer db upgrade`` has run."""

    code = "schema_behind"
    http_status = 503


class StoreConflict(StoreError):
    """A write that must change an exact number of rows (``Transaction.add(..., rows=N)``) found
    another count: another writer changed them first. Its transaction was rolled back."""

    code = "store_conflict"
    http_status = 409


class CheckpointInvalid(StoreError):
    """An audit checkpoint that cannot be read, or whose signature does not hold."""

    code = "checkpoint_invalid"
    http_status = 422


class ApprovalGone(PolicyError):
    """A caller came back for an approval that no longer waits (expired, or collected)."""

    code = "approval_gone"
    http_status = 410


class ApprovalAnswered(PolicyError):
    """An answer to an approval that someone answered first."""

    code = "approval_answered"
    http_status = 409


class ApprovalPending(PolicyError):
    """The call needs an approval nobody can give in this client; it returned at once. The same
    call made again (same session, tool, arguments and idempotency key) after a person answers
    runs under that answer."""

    code = "approval_pending"
    http_status = 428

    def __init__(self, message: str, *, approval_id: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.approval_id = approval_id

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["approval_id"] = self.approval_id
        return data


class InputRequired(PincerError):
    """The tool needs answers from the client before it can finish (2026-07-28 flow)."""

    code = "input_required"
    http_status = 409


class ArtifactRefused(PincerError):
    """An artifact the hub will not install or publish; the message says which check failed."""

    code = "artifact_refused"
    http_status = 422


class BuildRefused(ArtifactRefused):
    """A build plan that asks for what no built tool may have: financial or execute_code
    effects, a wildcard host. Nothing is built or registered."""

    code = "build_refused"
    http_status = 422


class ToolNameTaken(BuildRefused):
    """A build whose tool has the name of a tool there is already: replacing it takes
    ``--edit NAME`` or ``--replace``. Nothing is registered."""

    code = "tool_name_taken"
    http_status = 409


class BuildFailed(PincerError):
    """``pincer build`` used its iterations and no version passed its checks and tests; the
    failures are in the message and in ``$PINCER_HOME/builds/NAME/``."""

    code = "build_failed"
    http_status = 422


class IntegrityMismatch(ArtifactRefused):
    code = "integrity_mismatch"
    http_status = 409


class SignatureRefused(ArtifactRefused):
    code = "signature_refused"
    http_status = 403


class ArchiveRefused(ArtifactRefused):
    code = "archive_refused"
    http_status = 400


class ScanBlocked(ArtifactRefused):
    """High-severity findings of the install-time scanner; ``findings`` holds them (as dicts)."""

    code = "scan_blocked"
    http_status = 451

    def __init__(self, message: str, *, findings: tuple[dict[str, object], ...] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.findings = findings

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["findings"] = list(self.findings)
        return data


class LocalEdits(ArtifactRefused):
    code = "local_edits"
    http_status = 412


class HubUnavailable(PincerError):
    code = "hub_unavailable"
    http_status = 502


class ClientCapabilityMissing(UsageError):
    """The tool needs a client capability (sampling, elicitation, roots) the client lacks."""

    code = "client_capability_missing"
    http_status = 400

    def __init__(self, capability: str) -> None:
        super().__init__(
            f"this tool needs the client capability {capability!r}, which the client did not declare",
            hint=f"use an MCP client that supports {capability}",
        )
        self.capability = capability


def _tree(cls: type[PincerError]) -> list[type[PincerError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_tree(sub))
    return found


_BY_CODE: dict[str, type[PincerError]] = {}


def error_class(code: object) -> type[PincerError] | None:
    """The error class whose ``code`` this is, or None for a code no class carries."""
    if not _BY_CODE or str(code) not in _BY_CODE:
        _BY_CODE.update({cls.code: cls for cls in _tree(PincerError)})
    return _BY_CODE.get(str(code))


def http_status(code: object) -> int:
    """The HTTP status for an error code: the class's own, 500 for an unknown code."""
    cls = error_class(code)
    return cls.http_status if cls is not None else PincerError.http_status
