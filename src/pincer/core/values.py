"""The values that flow through the call chain: frozen, keyword-only dataclasses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pincer.core.effects import EffectKind, Mode, RuntimeKind

if TYPE_CHECKING:
    from pincer.core.capabilities import Capabilities

__all__ = [
    "JSON",
    "ToolSpec",
    "CallRequest",
    "Usage",
    "ToolResult",
    "ToolOutput",
    "Decision",
    "HostContext",
    "ClientChannel",
    "definition_hash",
    "canonical_json",
]

JSON = Any  # a value that json.dumps accepts

_VALUE = dict(frozen=True, kw_only=True, slots=True)


# One encoder built once: json.dumps with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical_json(value: JSON) -> str:
    """Deterministic JSON: sorted keys, no spaces, non-ASCII kept. Used for hashing."""
    return _CANONICAL(value)


def definition_hash(name: str, description: str, input_schema: Mapping[str, Any]) -> str:
    """sha256 over what an agent sees of a tool; a change means the tool changed under us."""
    payload = canonical_json({"name": name, "description": description, "input_schema": input_schema})
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(**_VALUE)
class ToolSpec:
    """What the registry knows of a tool. ``definition_hash`` is derived when left empty."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    effects: frozenset[EffectKind]
    runtime: RuntimeKind
    side_effecting: bool
    source: str
    definition_hash: str = ""
    output_schema: Mapping[str, Any] | None = None
    capabilities: Capabilities | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.definition_hash:
            digest = definition_hash(self.name, self.description, self.input_schema)
            object.__setattr__(self, "definition_hash", digest)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "runtime": self.runtime.value,
            "effects": sorted(e.value for e in self.effects),
            "side_effecting": self.side_effecting,
            "source": self.source,
            "definition_hash": self.definition_hash,
            "input_schema": self.input_schema,
        }


@runtime_checkable
class ClientChannel(Protocol):
    """The way back to whoever made the call (an MCP client): progress and log notifications.
    The gateway may offer more (elicitation, sampling) on its own implementation."""

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None: ...

    async def log(self, level: str, message: str) -> None: ...


@dataclass(**_VALUE)
class CallRequest:
    """One call of one tool, as every entry point builds it."""

    tool: str
    args: Mapping[str, Any]
    session: str = "main"
    idempotency_key: str | None = None
    caller: str = "api"  # cli | mcp | rest | wasm | skill | api: recorded in the audit log
    client: ClientChannel | None = field(default=None, compare=False, repr=False)
    depth: int = 0  # nesting of tool-invoke calls; the dispatcher refuses past a limit


@dataclass(**_VALUE)
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


@dataclass(**_VALUE)
class ToolOutput:
    """What a runtime returns. ``value`` is the JSON result; ``content`` optional MCP content blocks
    (text, image, audio, resource) passed through to MCP clients unchanged after scanning."""

    value: JSON = None
    content: tuple[Mapping[str, Any], ...] | None = None
    is_error: bool = False
    logs: tuple[str, ...] = ()
    usage: Mapping[str, Any] = field(default_factory=dict)


@dataclass(**_VALUE)
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
        data["cached"] = self.cached
        data["audit_id"] = self.audit_id
        return data


@dataclass(**_VALUE)
class Decision:
    """allow / ask / deny, always with a reason a person can read."""

    mode: Mode
    reason: str
    grant_id: str | None = None
    hosts: tuple[str, ...] | None = None  # hosts the grant allows; None: what the tool declares

    @property
    def is_allowed(self) -> bool:
        return self.mode is Mode.ALLOW


# The dispatcher passes a way back into the call chain (WASM tool-invoke, composite tools).
InvokeCallback = Callable[[CallRequest], Awaitable["ToolResult"]]


@dataclass(**_VALUE)
class HostContext:
    """The grant made concrete for one execution; runtimes enforce it and decide nothing."""

    session: str
    tool: str
    network_hosts: tuple[str, ...] | None = None  # None: the tool's declared allowlist applies
    allow_private_network: bool = False
    workspace: Path | None = None
    timeout_s: float = 30.0
    max_output_bytes: int = 100_000
    capabilities: Capabilities | None = None
    secrets: Any = None  # pincer.secrets.SecretAccess: resolves allowed names, records injected values
    invoke: InvokeCallback | None = None
    client: ClientChannel | None = None
    depth: int = 0
