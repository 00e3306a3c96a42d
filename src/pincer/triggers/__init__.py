"""Triggers: commands, schedules and webhooks -> run requests, persisted, audited and handed to
the agent loop through one seam (:class:`RunStarter`). README "Triggers" is the reference.

The engine is ``pincer.triggers.engine.TriggerEngine`` (``Pincer.triggers``); the recording
starter and the manual clock (``pincer.triggers.recording``, ``pincer.triggers.clock``) are the
in-package stand-ins tests use.
"""

from pincer.triggers.requests import (
    Budgets,
    RunOutcome,
    RunRequest,
    RunStarter,
    RunStatus,
    TriggerKind,
    TriggerRef,
    UntrustedInput,
)

__all__ = [
    "RunRequest",
    "RunStarter",
    "RunOutcome",
    "RunStatus",
    "TriggerKind",
    "TriggerRef",
    "Budgets",
    "UntrustedInput",
]
