"""The run starter ``pincer serve`` hands firings to.

Until the agent loop (the ``runs`` of issue 13) is wired in here, there is nothing that can
carry a run out: every firing is recorded, audited and queued as usual, and its start fails with
a message that says so. Wiring the loop in means returning its adapter from
:func:`default_starter` (see ``RunStarter`` in ``requests.py`` for the contract).
"""

from __future__ import annotations

from typing import Any

from pincer.core.errors import RuntimeUnavailable
from pincer.triggers.requests import RunOutcome, RunRequest, RunStarter, RunStatus

__all__ = ["UnwiredStarter", "default_starter"]


class UnwiredStarter:
    async def start(self, request: RunRequest) -> str:
        raise RuntimeUnavailable(
            f"cannot start run {request.run_id} ({request.trigger}): this pincer has no agent loop to run skills with",
            hint="the firing is recorded (`pincer triggers list`, `pincer audit list`); runs start once the agent loop is installed",
        )

    async def wait(self, run_id: str) -> RunOutcome:
        return RunOutcome(run_id=run_id, status=RunStatus.LOST, error="no agent loop")


def default_starter(pincer: Any) -> RunStarter:
    return UnwiredStarter()
