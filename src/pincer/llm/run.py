"""A skill run as data: :class:`RunRequest` in, :class:`Run` out, :class:`RunEvent` as it goes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.llm.messages import TokenUsage

__all__ = ["RunRequest", "OutsideData", "RunEvent", "ToolCallRecord", "Run"]


@dataclass(frozen=True, kw_only=True, slots=True)
class OutsideData:
    """Data from outside pincer a run starts with (a webhook's payload). The model gets it as
    untrusted tool output under ``tool``, and the run is tainted from its first call."""

    tool: str  # what the taint names, e.g. "webhook:gh"
    source: str  # where it came from, for a person: "webhook gh, delivery 72d3 (github.pr.opened)"
    content: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    """What to run. ``skill`` None is a plain conversation (``pincer chat`` without a skill).
    ``session`` None means ``[agent] session``; ``budgets`` override ``[agent]``'s by name
    (``turns``, ``tool_calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, ``deadline_s``)."""

    skill: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    message: str | None = None
    session: str | None = None
    trigger: str = "manual"  # cli | chat | rest | mcp | manual | webhook | schedule | command
    profile: str | None = None
    budgets: Mapping[str, Any] | None = None
    depth: int = 0  # a run started from inside a tool call (run_skill) is one level deeper
    run_id: str | None = None  # chosen by a trigger that promised it to its caller; None: a new one
    arguments: str | None = None  # a /command's argument text, for the skill's $ARGUMENTS
    outside: tuple[OutsideData, ...] = ()
    # The person on whose behalf it runs (their token started it): named on the run, its audit
    # records and every call it makes, and a per-person credential is theirs (docs/teams.md); a
    # person who is no operator makes no call that changes policy. None: the run acts for no one.
    person: str | None = None
    may_change_policy: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent:
    """What a run reports while it goes: ``started``, ``text`` (a delta), ``retrying``,
    ``tool_call``, ``approval``, ``tool_result``, ``turn`` (usage after each turn), ``ended``."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRecord:
    call_id: str
    tool: str
    args: Any  # redacted
    ok: bool
    error_code: str | None = None
    audit_id: int | None = None
    cached: bool = False
    turn: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "args": self.args,
            "ok": self.ok,
            "error_code": self.error_code,
            "audit_id": self.audit_id,
            "cached": self.cached,
            "turn": self.turn,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """How a run ended. ``stop``: for ``budget_exceeded`` the budget's name; for ``done`` the
    model's stop reason (``end``, ``max_tokens``)."""

    id: str
    status: str
    stop: str | None
    text: str
    skill: str | None
    session: str
    provider: str
    model: str
    usage: TokenUsage
    cost_usd: float | None
    turns: int
    tool_calls: tuple[ToolCallRecord, ...]
    error: Mapping[str, Any] | None = None
    started_at: float = 0.0
    ended_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "stop": self.stop,
            "text": self.text,
            "skill": self.skill,
            "session": self.session,
            "provider": self.provider,
            "model": self.model,
            "usage": {**self.usage.to_dict(), "turns": self.turns, "tool_calls": len(self.tool_calls)},
            "cost_usd": self.cost_usd,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "error": dict(self.error) if self.error else None,
            "duration_s": round(self.ended_at - self.started_at, 3),
        }
