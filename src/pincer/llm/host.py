"""What the agent loop uses of the service: a narrow, typed view of ``pincer.service.Pincer``.

The service sits above llm (it composes every part), so llm cannot import it; these Protocols say
what a loop and its runs read from it (``pincer.llm.runner.RunnerHost`` adds the loop), the way pydantic-ai types ``RunContext``.
They are properties (read-only here): the service may replace a part (``config`` on reload).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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

__all__ = ["AgentHost"]


class AgentHost(Protocol):
    """What :class:`pincer.llm.loop.AgentLoop` and its runs read from the service."""

    @property
    def config(self) -> Config: ...

    @property
    def home(self) -> Path: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def grants(self) -> GrantStore: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def skills(self) -> SkillLibrary | None: ...

    @property
    def metrics(self) -> Metrics | None: ...

    def scanner(self) -> LeakScanner: ...

