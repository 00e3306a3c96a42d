"""Triggers: commands, schedules and webhooks -> run requests, persisted, audited and handed to
the agent loop through one seam (:class:`RunStarter`). docs/triggers.md is the reference.

The engine is ``pincer.triggers.engine.TriggerEngine`` (``Pincer.triggers``); the manual clock
(``pincer.triggers.clock``) is the in-package stand-in tests use, and the recording starter that
stands in for the agent loop lives with the tests (``tests/triggers/recording.py``).
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
