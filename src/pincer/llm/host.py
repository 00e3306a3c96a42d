"""What the agent loop is given of the service: :class:`AgentServices`, made by
``pincer.service.Pincer.agent_services()`` (what starts runs is given ``llm/services.py``'s).

The service sits above llm (it composes every part), so llm names only what a loop and its runs
use, the way pydantic-ai types ``RunContext``. What the service replaces while it runs is read at
each use through a function: ``config`` (a reloaded config.toml), ``skills`` (the library, when
[skills] is on) and ``metrics`` (kept once the gateway enables them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.dispatch import Dispatcher
    from pincer.registry import Registry
    from pincer.safety.scanner import LeakScanner
    from pincer.secrets.store import SecretStore
    from pincer.skills.library import SkillLibrary
    from pincer.store.audit import AuditLog
    from pincer.store.grants import GrantStore
    from pincer.store.runs import RunStore
    from pincer.telemetry.metrics import Metrics

__all__ = ["AgentServices"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentServices:
    """What :class:`pincer.llm.loop.AgentLoop` and its runs use: the run, grant and audit stores,
    the registry and the dispatcher (every tool call goes through its chain), the secret store (a
    model's API key) and the leak scanner, and config, skills and metrics as they are now."""

    config: Callable[[], Config]
    audit: AuditLog
    grants: GrantStore
    runs: RunStore
    registry: Registry
    dispatcher: Dispatcher
    secrets: SecretStore
    skills: Callable[[], SkillLibrary | None]
    metrics: Callable[[], Metrics | None]
    scanner: Callable[[], LeakScanner]
