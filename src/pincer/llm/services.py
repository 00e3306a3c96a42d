"""What starts runs is given of the service: :class:`RunnerServices` (the trigger engine's
``AgentStarter``) and :class:`DelegateServices` (``run_skill``), made by ``pincer.service.Pincer``
(``runner_services()``, ``delegate_services()``). Apart from llm/host.py, which the loop imports:
these name the loop. This module imports nothing at run time, so the service makes them without
loading the loop (it is made on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.dispatch import Dispatcher
    from pincer.llm.loop import AgentLoop
    from pincer.store.runs import RunStore

__all__ = ["DelegateServices", "RunnerServices"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerServices:
    """What starts runs and follows them (the trigger engine's ``AgentStarter``): the agent loop,
    asked for at each start (the service makes it on first use), and the run store. Made by
    ``pincer.service.Pincer.runner_services()``."""

    agent: Callable[[], AgentLoop]
    runs: RunStore


@dataclass(frozen=True, kw_only=True, slots=True)
class DelegateServices:
    """What ``run_skill`` (llm/delegate.py) uses: the agent loop (asked for at each run), the
    chain that answers the approvals it asks, and the config whose ``[agent] deadline_s`` bounds
    a delegated run, as it is now. Made by ``pincer.service.Pincer.delegate_services()``."""

    agent: Callable[[], AgentLoop]
    dispatcher: Dispatcher
    config: Callable[[], Config]
