"""What the dashboard uses of the service, one typed value (``gateway/services.py`` makes it of a
Pincer; the pages read it with :func:`services_of`), instead of the whole Pincer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.dispatch import Dispatcher
    from pincer.registry import Registry
    from pincer.runtimes.mcp.runtime import McpRuntime
    from pincer.secrets.store import SecretStore
    from pincer.skills.library import SkillLibrary
    from pincer.store.approvals import ApprovalStore
    from pincer.store.audit import AuditLog
    from pincer.store.grants import GrantStore
    from pincer.store.oidc_logins import OidcLoginStore
    from pincer.store.people import PeopleStore
    from pincer.store.runs import RunStore
    from pincer.store.tasks import TaskStore

__all__ = ["DashboardServices", "services_of"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DashboardServices:
    """The dashboard's collaborators. ``config``, ``upstream`` and ``restart_needed`` are read at
    each page: a reloaded config.toml replaces them on the service. ``shown`` masks every known
    secret value in what a page prints (``Pincer.shown``)."""

    config: Callable[[], Config]
    home: Path
    approvals: ApprovalStore
    audit: AuditLog
    grants: GrantStore
    runs: RunStore
    tasks: TaskStore
    people: PeopleStore
    oidc_logins: OidcLoginStore
    secrets: SecretStore
    registry: Registry
    dispatcher: Dispatcher  # answers approvals through the chain
    skills: SkillLibrary | None  # None while [skills] is off
    upstream: Callable[[], McpRuntime | None]  # the MCP runtime (None while no server is configured)
    restart_needed: Callable[[], tuple[str, ...]]
    shown: Callable[[Any], Any]


def services_of(request: Request) -> DashboardServices:
    services: DashboardServices = request.app.state.services
    return services
