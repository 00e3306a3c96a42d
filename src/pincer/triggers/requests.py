"""What a firing asks for, and the one seam it is handed to.

Every trigger (a ``/command``, a schedule, a webhook delivery, ``pincer cron run``) builds a
:class:`RunRequest` and hands it to a :class:`RunStarter`. The agent loop is the real starter; a
``RecordingStarter`` (``tests/triggers/recording.py``) stands in for it in tests and benchmarks.
The request is shaped like the loop's own (skill, params, message, session, trigger, budgets)
plus what a trigger knows that a person at the keyboard does not: the run id it promised its
caller (a webhook's 202 carries it), and data from outside that the run must treat as untrusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pincer.core.ids import random_id

__all__ = [
    "TriggerKind",
    "TriggerRef",
    "Budgets",
    "UntrustedInput",
    "RunRequest",
    "RunStatus",
    "RunOutcome",
    "RunStarter",
    "new_run_id",
    "new_firing_id",
]


class TriggerKind(StrEnum):
    COMMAND = "command"
    SCHEDULE = "schedule"
    WEBHOOK = "webhook"
    MANUAL = "manual"


def new_run_id() -> str:
    return random_id("run-")


def new_firing_id() -> str:
    return random_id("fire-")


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerRef:
    """Which trigger fired and who or what fired it (recorded with the run)."""

    kind: TriggerKind
    name: str  # the job, the hook, or the /command
    firing_id: str
    fired_by: str  # "scheduler", "pincer cron run", "rest:main", "webhook from 127.0.0.1"

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "name": self.name, "firing_id": self.firing_id, "fired_by": self.fired_by}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TriggerRef:
        return cls(
            kind=TriggerKind(data["kind"]), name=str(data["name"]), firing_id=str(data["firing_id"]),
            fired_by=str(data.get("fired_by", "")),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Budgets:
    """Per-run limits a trigger asks for; None leaves the loop's ``[agent]`` default."""

    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None
    deadline_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__ if getattr(self, name) is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Budgets:
        data = data or {}
        return cls(**{name: data[name] for name in cls.__slots__ if data.get(name) is not None})


@dataclass(frozen=True, kw_only=True, slots=True)
class UntrustedInput:
    """Data from outside pincer the run reads (a webhook payload): shown to the model marked
    untrusted, and the run is tainted from its start (the taint rule asks before side effects)."""

    source: str  # "webhook gh, delivery 72d3... (github.pr.opened)"
    content: str  # JSON text, redacted, bounded by the hook's body limit

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "content": self.content}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    """One run to start. ``run_id`` is chosen by the trigger before the run exists (it is
    persisted with the firing and may be answered to a caller at once): a starter given a
    ``run_id`` it already started must start nothing and return it."""

    run_id: str
    skill: str | None
    params: Mapping[str, Any]
    message: str | None
    session: str
    trigger: TriggerRef
    budgets: Budgets = field(default_factory=Budgets)
    arguments: str | None = None  # a /command's raw argument text (render_skill's ``arguments``)
    untrusted: tuple[UntrustedInput, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "skill": self.skill,
            "params": dict(self.params),
            "message": self.message,
            "session": self.session,
            "trigger": self.trigger.to_dict(),
            "budgets": self.budgets.to_dict(),
            "arguments": self.arguments,
            "untrusted": [u.to_dict() for u in self.untrusted],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRequest:
        return cls(
            run_id=str(data["run_id"]),
            skill=data.get("skill"),
            params=dict(data.get("params") or {}),
            message=data.get("message"),
            session=str(data["session"]),
            trigger=TriggerRef.from_dict(data["trigger"]),
            budgets=Budgets.from_dict(data.get("budgets")),
            arguments=data.get("arguments"),
            untrusted=tuple(
                UntrustedInput(source=str(u["source"]), content=str(u["content"])) for u in data.get("untrusted") or ()
            ),
        )


class RunStatus(StrEnum):
    """How a run ended, in the agent loop's words, plus ``lost`` (nobody can say any more)."""

    DONE = "done"
    FAILED = "failed"
    BUDGET_EXCEEDED = "budget_exceeded"
    CANCELLED = "cancelled"
    LOST = "lost"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    run_id: str
    status: RunStatus
    error: str | None = None

    @property
    def is_failure(self) -> bool:
        return self.status in (RunStatus.FAILED, RunStatus.LOST)


class RunStarter(Protocol):
    """Starts runs and reports how they ended.

    ``start`` returns once the run is under way (its id is ``request.run_id``); the run goes on
    in the background. It is idempotent on the run id: after a crash the engine may hand the
    same request again, and a starter that knows the id starts nothing. ``wait`` returns when
    the run has ended; a run id the starter never saw ends as ``lost``.
    """

    async def start(self, request: RunRequest) -> str: ...

    async def wait(self, run_id: str) -> RunOutcome: ...
