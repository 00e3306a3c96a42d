"""The values that flow through the call chain: frozen, keyword-only dataclasses."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pincer.core.acts import Actor
from pincer.core.effects import EffectKind, Mode, RuntimeKind

if TYPE_CHECKING:
    from pincer.core.capabilities import Capabilities

__all__ = [
    "JSON",
    "ToolSpec",
    "CallEffects",
    "CallRequest",
    "Usage",
    "ToolResult",
    "ToolOutput",
    "Decision",
    "HostContext",
    "DEFAULT_TOOL_TIMEOUT_S",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "ClientChannel",
    "HostSecrets",
    "RuntimeAsk",
    "Taint",
    "definition_hash",
    "policy_hash",
    "canonical_json",
    "plain_value",
]

JSON = Any  # a value that json.dumps accepts

# A call's limits when nothing names them: HostContext's defaults, and the config model's for
# [tools] timeout_s and [output] max_bytes (pincer.config reads them from here, below it).
DEFAULT_TOOL_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 100_000



# One encoder built once: json.dumps with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical_json(value: JSON) -> str:
    """Deterministic JSON: sorted keys, no spaces, non-ASCII kept. Used for hashing."""
    return _CANONICAL(value)


def definition_hash(name: str, description: str, input_schema: Mapping[str, Any]) -> str:
    """sha256 over what an agent sees of a tool; a change means the tool changed under us."""
    payload = canonical_json({"name": name, "description": description, "input_schema": input_schema})
    return hashlib.sha256(payload.encode()).hexdigest()


def plain_value(value: Any) -> JSON:
    """A value as plain JSON with a stable order: dataclasses by field, sets sorted, enums by
    value. The input of policy hashes, so two equal values always hash alike."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return plain_value(value.value)
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain_value(v) for v in value), key=canonical_json)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def policy_hash(
    *,
    name: str,
    effects: frozenset[EffectKind],
    side_effecting: bool,
    capabilities: Capabilities | None,
    annotations: Mapping[str, Any],
    call_effects: CallEffects | None = None,
) -> str:
    """sha256 over everything that decides what a call of the tool may do. Grant decisions are
    cached under it, registry change events and MCP pins compare it: a tool whose effects,
    capabilities or behaviour hints change is a changed tool, even with the same description."""
    fields: dict[str, Any] = {
        "name": name,
        "effects": sorted(e.value for e in effects),
        "side_effecting": side_effecting,
        "capabilities": plain_value(capabilities),
        "annotations": plain_value(annotations),
    }
    # Only tools that decide effects per call carry the key, so every hash stored before call
    # effects existed (MCP pins, grant caches) stays what it was.
    if call_effects is not None:
        fields["call_effects"] = plain_value(call_effects)
    return hashlib.sha256(canonical_json(fields).encode()).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class CallEffects:
    """The effects of one call, decided by one of its arguments: the ``http`` tool's ``method``
    (a GET reads, a POST writes), a built-in's ``action`` (``get_repo`` reads, ``create_issue``
    writes). Grants, the taint rule, approvals and the audit read the call's effects, so a grant
    can allow a tool's reads and keep its writes asking.

    ``table`` maps a value of ``arg`` to the call's whole effect set. A call whose value is not a
    string or not in the table gets the tool's whole ``effects`` (fail closed); an absent argument
    counts as ``default`` (the schema's default, e.g. ``"GET"``) when one is given. With
    ``casefold`` the value is compared case-insensitively (HTTP methods)."""

    arg: str
    table: Mapping[str, frozenset[EffectKind]]
    default: str | None = None
    casefold: bool = False

    def __post_init__(self) -> None:
        if self.casefold:
            object.__setattr__(self, "table", {k.casefold(): v for k, v in self.table.items()})

    def lookup(self, args: object) -> frozenset[EffectKind] | None:
        """The effect set ``args`` select, or None when the table does not say (fail closed)."""
        value = args.get(self.arg, self.default) if isinstance(args, Mapping) else None
        if not isinstance(value, str):
            return None
        return self.table.get(value.casefold() if self.casefold else value)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """What the registry knows of a tool. ``definition_hash`` (what an agent sees) and
    ``policy_hash`` (what decides a call) are derived from the other fields."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    effects: frozenset[EffectKind]
    runtime: RuntimeKind
    side_effecting: bool
    source: str
    output_schema: Mapping[str, Any] | None = None
    capabilities: Capabilities | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    # Whether what the tool returns may be read by a model as trusted text (pincer's own pure
    # tools). False, the default, marks it untrusted: the agent loop's taint rule reads this.
    output_trusted: bool = False
    # Effects per call (see CallEffects); ``effects`` is then what a call may do at most.
    call_effects: CallEffects | None = None
    # Derived, never passed: ``dataclasses.replace`` recomputes them, so a copy with other
    # effects can never carry the old hash.
    definition_hash: str = field(init=False, default="")
    policy_hash: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "definition_hash", definition_hash(self.name, self.description, self.input_schema))
        digest = policy_hash(
            name=self.name,
            effects=self.effects,
            side_effecting=self.side_effecting,
            capabilities=self.capabilities,
            annotations=self.annotations,
            call_effects=self.call_effects,
        )
        object.__setattr__(self, "policy_hash", digest)

    def effects_for(self, args: object) -> frozenset[EffectKind]:
        """The effects of a call with ``args``: its ``call_effects`` row, else the tool's whole
        set. Never more than ``effects``: a row naming more is cut to what the tool declares."""
        if self.call_effects is None:
            return self.effects
        found = self.call_effects.lookup(args)
        return self.effects if found is None else found & self.effects

    @property
    def identity(self) -> tuple[str, str]:
        """What must stay equal for the tool to count as unchanged: both hashes."""
        return (self.definition_hash, self.policy_hash)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "runtime": self.runtime.value,
            "effects": sorted(e.value for e in self.effects),
            "side_effecting": self.side_effecting,
            "source": self.source,
            "definition_hash": self.definition_hash,
            "policy_hash": self.policy_hash,
            "output_trusted": self.output_trusted,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": dict(self.annotations),
        }


@runtime_checkable
class ClientChannel(Protocol):
    """The way back to whoever made the call (an MCP client): progress and log notifications.
    The gateway may offer more (elicitation, sampling) on its own implementation."""

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None: ...

    async def log(self, level: str, message: str) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Taint:
    """A run has read untrusted output (a fetched page, an MCP server's answer): which output.
    A later call of the run with a sensitive effect then asks (``mode`` "ask") or is refused
    ("deny") even where a grant allows it; the approval names this output."""

    tool: str
    audit_id: int | None = None
    call_id: str | None = None
    mode: str = "ask"  # ask | deny
    # outside | local: text from outside the machine (the default: fail closed) or a local file;
    # policy/taint.py says which effects each makes ask.
    reach: str = "outside"
    what: str | None = None  # what tainted it when not a tool's output ("the parameters given by ...")

    def describe(self) -> str:
        if self.what:
            return self.what
        record = f" (audit record {self.audit_id})" if self.audit_id is not None else ""
        return f"the output of {self.tool}{record}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRequest:
    """One call of one tool, as every entry point builds it."""

    tool: str
    args: Mapping[str, Any]
    session: str = "main"
    idempotency_key: str | None = None
    caller: str = "api"  # cli | mcp | rest | wasm | skill | agent | api: recorded in the audit log
    client: ClientChannel | None = field(default=None, compare=False, repr=False)
    depth: int = 0  # nesting of tool-invoke calls; the dispatcher refuses past a limit
    run_id: str | None = None  # the agent run the call belongs to, recorded in the audit log
    taint: Taint | None = None  # set by the agent loop once its run has read untrusted output
    call_id: str | None = None  # the model's id of the tool call (agent runs): traces name it
    # The person behind the call (a personal access token's): recorded in the audit log. A call
    # whose caller may not change policy (a person who is no operator) is refused a tool that
    # would (installs, builds, grants: modify_extension, modify_approval).
    person: str | None = None
    may_change_policy: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    duration_ms: float = 0.0
    output_bytes: int = 0
    truncated: bool = False
    redactions: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "duration_ms": round(self.duration_ms, 3),
            "output_bytes": self.output_bytes,
            "truncated": self.truncated,
            "redactions": self.redactions,
        }
        if self.extra:
            data.update(self.extra)
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """What a runtime returns. ``value`` is the JSON result; ``content`` optional MCP content blocks
    (text, image, audio, resource) passed through to MCP clients unchanged after scanning."""

    value: JSON = None
    content: tuple[Mapping[str, Any], ...] | None = None
    is_error: bool = False
    logs: tuple[str, ...] = ()
    usage: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    ok: bool
    output: JSON = None
    error: Mapping[str, Any] | None = None
    content: tuple[Mapping[str, Any], ...] | None = None
    usage: Usage = field(default_factory=Usage)
    audit_id: int | None = None
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok}
        if self.ok:
            data["output"] = self.output
        else:
            data["error"] = dict(self.error or {})
        if self.content:
            # The MCP content blocks (an MCP tool's text, images, resources) beside the value.
            data["content"] = [dict(block) for block in self.content]
        data["cached"] = self.cached
        data["audit_id"] = self.audit_id
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """allow / ask / deny, always with a reason a person can read."""

    mode: Mode
    reason: str
    grant_id: str | None = None
    hosts: tuple[str, ...] | None = None  # hosts the grant allows; None: what the tool declares

    @property
    def is_allowed(self) -> bool:
        return self.mode is Mode.ALLOW


class HostSecrets(Protocol):
    """The secrets one call may use, as a runtime sees them (``pincer.secrets.SecretAccess``; the
    builder's test bench passes throwaway values): ``find`` gives an allowed secret's value or
    None (``has``: whether it would), and every value a runtime sends is ``record``-ed so the leak scan of the call's output
    knows it (``injected``)."""

    def find(self, name: str) -> str | None: ...

    def has(self, name: str) -> bool:
        """Whether ``find`` would give a value, without handing it out (the chain's preflight)."""
        ...

    def record(self, value: str) -> None: ...

    @property
    def injected(self) -> Sequence[str]: ...


# The dispatcher passes a way back into the call chain (WASM tool-invoke, composite tools).
InvokeCallback = Callable[[CallRequest], Awaitable["ToolResult"]]


@dataclass(frozen=True, kw_only=True, slots=True)
class HostContext:
    """The grant made concrete for one execution; runtimes enforce it and decide nothing."""

    session: str
    tool: str
    network_hosts: tuple[str, ...] | None = None  # None: the tool's declared allowlist applies
    allow_private_network: bool = False
    workspace: Path | None = None
    # PINCER_HOME: the workspace's files are never pincer's own (keys, secrets, databases), and
    # when the workspace holds PINCER_HOME nothing in it is read or written (runtimes/native/workspace.py)
    home: Path | None = None
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    capabilities: Capabilities | None = None
    secrets: HostSecrets | None = None  # resolves the names this call may use, records injected values
    invoke: InvokeCallback | None = None
    client: ClientChannel | None = None
    depth: int = 0
    run_id: str | None = None  # the agent run making the call (a canvas delivers people's actions to it)
    # What the run had read when it made this call (None: nothing untrusted): a canvas records it
    # with what the call drew, so the drawing's events carry their author's trust.
    taint: Taint | None = None
    # Set when the chain's approval step let this call through: the approval id, or
    # "ask_fallback" when a runtime's own policy allowed it after nobody answered.
    approval: str | None = None
    caller: str = "api"  # the call's CallRequest.caller: who a tool's own act is recorded as (core/acts.py)
    # The call's CallRequest.person and may_change_policy: a run this call starts (run_skill) acts
    # for the same person, with no more than they may.
    person: str | None = None
    may_change_policy: bool = True
    # The caller is a person or a main session: its client may be asked questions on the call's
    # behalf (an upstream MCP task's inputRequests); an agent's session may not answer them.
    speaks_for_person: bool = False

    @property
    def actor(self) -> Actor:
        """Who an act this call does is recorded as: its caller, in its session."""
        return Actor(channel=self.caller, principal=self.session)


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeAsk:
    """A runtime's own reason to ask a person before a call runs (exec approvals), returned by
    its ``preflight``. The chain folds it into its one approval step: one request, one timeout,
    one audit record, every way to answer. ``remember`` persists an ``allow_always`` in the
    runtime's own policy (the exec allowlist); ``fallback_allows`` says the runtime's policy lets
    the call run when nobody answers in time."""

    reason: str
    effects: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)
    fallback_allows: bool = False
    remember: Callable[[], None] | None = field(default=None, compare=False, repr=False)
