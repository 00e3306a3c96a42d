"""What a firing came to (:class:`Firing`): a value of its own, so that the engine and the
scheduler it drives both import it from here and not from each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Firing"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Firing:
    """What a firing came to: queued with its run id, or an error saying why not."""

    id: str
    run_id: str
    kind: str
    name: str
    status: str  # queued | error
    skill: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "firing_id": self.id, "run_id": self.run_id, "trigger": f"{self.kind}:{self.name}", "status": self.status,
            "skill": self.skill, "params": dict(self.params),
        }  # fmt: skip
        if self.error is not None:
            data["error"] = dict(self.error)
        return data
